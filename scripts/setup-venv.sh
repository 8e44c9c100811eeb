#!/usr/bin/env bash
# Create .venv, install calico-py editable with its test extras, and make Debian's
# libnftables binding (python3-nftables, not on PyPI) importable inside the venv.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=.venv

if [[ ! -x $VENV/bin/python ]]; then
    "$PYTHON" -m venv "$VENV"
fi

stamp=$VENV/.calico-installed
if [[ ! -f $stamp || pyproject.toml -nt $stamp ]]; then
    log=$VENV/pip-install.log
    if ! { "$VENV/bin/python" -m pip install --disable-pip-version-check -U pip &&
           "$VENV/bin/python" -m pip install --disable-pip-version-check -e '.[test]'; } >"$log" 2>&1; then
        cat "$log" >&2
        echo "setup-venv: pip install failed (log above, also in $log)" >&2
        exit 1
    fi
    "$VENV/bin/python" -c "import calico, click, pydantic, yaml, pytest, hypothesis"
    touch "$stamp"
fi

site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [[ -d /usr/lib/python3/dist-packages/nftables && ! -e $site/nftables ]]; then
    ln -s /usr/lib/python3/dist-packages/nftables "$site/nftables"
fi
