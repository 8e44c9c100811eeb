#!/usr/bin/env bash
# Put this checkout's `calico` and `calicoctl` on PATH, or take them off again.
#
#   scripts/link-bin.sh install     (run by `make setup`)
#   scripts/link-bin.sh uninstall   (run by `make uninstall`)
#
# Links live in $BINDIR (default $PREFIX/bin, PREFIX=/usr/local) and point at .venv/bin/<name>.
# install is idempotent and quiet when nothing changes. It never replaces a file that is not a
# link, nor a link to another installation that still exists: it says so and leaves it (so
# `make setup` keeps working; the venv's scripts stay usable by full path). A dangling link
# (e.g. to a deleted checkout) is replaced. uninstall removes exactly the links that point into
# this checkout's venv and nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."

ROOT=$(pwd -P)
VENV_BIN=$ROOT/.venv/bin
PREFIX=${PREFIX:-/usr/local}
BINDIR=${BINDIR:-$PREFIX/bin}
NAMES=(calico calicoctl)

say() { echo "link-bin: $*"; }
warn() { echo "link-bin: $*" >&2; }

ours() { # $1 = link path, $2 = name: a link to exactly this checkout's script
    [[ -L $1 && $(readlink "$1") == "$VENV_BIN/$2" ]]
}

install() {
    for name in "${NAMES[@]}"; do
        if [[ ! -x $VENV_BIN/$name ]]; then
            warn "$VENV_BIN/$name does not exist: build the venv first (make setup)"
            exit 1
        fi
    done
    if ! mkdir -p "$BINDIR" 2>/dev/null || [[ ! -w $BINDIR ]]; then
        warn "cannot write to $BINDIR: calico and calicoctl stay in $VENV_BIN only" \
            "(run as root, or set BINDIR to a writable directory on PATH)"
        return 0
    fi
    for name in "${NAMES[@]}"; do
        local target=$BINDIR/$name
        if ours "$target" "$name"; then
            continue
        elif [[ -L $target && ! -e $target ]]; then
            local old
            old=$(readlink "$target")
            ln -sfn "$VENV_BIN/$name" "$target"
            say "replaced dangling link $target (was -> $old) -> $VENV_BIN/$name"
        elif [[ -L $target ]]; then
            warn "left $target alone: it links to $(readlink "$target"), another installation;" \
                "remove it (or 'make uninstall' in that checkout) and run 'make setup' again" \
                "to use $VENV_BIN/$name"
        elif [[ -e $target ]]; then
            warn "left $target alone: it is not a link (an existing file);" \
                "remove or rename it and run 'make setup' again to use $VENV_BIN/$name"
        else
            ln -s "$VENV_BIN/$name" "$target"
            say "linked $target -> $VENV_BIN/$name"
        fi
    done
    case ":$PATH:" in
    *":$BINDIR:"*) ;;
    *) warn "note: $BINDIR is not on PATH" ;;
    esac
}

uninstall() {
    for name in "${NAMES[@]}"; do
        local target=$BINDIR/$name
        if ours "$target" "$name"; then
            rm -f "$target"
            say "removed $target"
        elif [[ -e $target || -L $target ]]; then
            warn "left $target alone: it does not link into $VENV_BIN"
        fi
    done
}

case "${1:-}" in
install) install ;;
uninstall) uninstall ;;
*)
    warn "usage: $0 install|uninstall  (target directory: BINDIR, default \$PREFIX/bin = /usr/local/bin)"
    exit 2
    ;;
esac
