"""Stage, compare, check, install and reload one BIRD instance's files
(design/confd.md "Install").

Rendered files are written to a stage file beside their destination and compared with it by
content *and* mode/owner; identical files are dropped. When any of a daemon's files changed,
its ``check_cmd`` (``bird -p -c``) runs on a scratch copy of the whole set (the main file
``include``s the other two), so a set BIRD rejects is never installed: the old files stay and
BIRD keeps running them. Then each changed file is renamed into place atomically and the
daemon reloaded once.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from calico.confd.resources import TemplateResource

log = logging.getLogger(__name__)
DEFAULT_MODE = 0o644


class CheckFailed(Exception):
    """BIRD rejected a rendered configuration."""


@dataclass
class Staged:
    res: TemplateResource
    stage: Path
    changed: bool


def _stage(res: TemplateResource, text: str) -> Staged:
    dest = res.dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{dest.name}", dir=dest.parent)
    stage = Path(name)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    try:
        st = dest.stat()
        mode, uid, gid = st.st_mode & 0o7777, st.st_uid, st.st_gid
        exists = True
    except FileNotFoundError:
        mode, uid, gid, exists = DEFAULT_MODE, os.getuid(), os.getgid(), False
    os.chmod(stage, mode)
    if exists:
        os.chown(stage, uid, gid)
    changed = (
        not exists
        or dest.read_bytes() != text.encode()
        or (
            (dest.stat().st_mode & 0o7777, dest.stat().st_uid, dest.stat().st_gid)
            != (mode, uid, gid)
        )
    )
    return Staged(res, stage, changed)


def _run(cmd: str) -> subprocess.CompletedProcess[str]:
    return (
        subprocess.run(
            ["/bin/sh", "-c", cmd], capture_output=True, text=True, timeout=60, check=False
        )
        if cmd
        else subprocess.CompletedProcess([], 0, "", "")
    )


def check_set(staged: list[Staged], others: list[TemplateResource]) -> None:
    """Run the set's check_cmd on a scratch directory holding the new files (and the current
    version of the unchanged ones); CheckFailed with BIRD's message when it rejects them."""
    checks = [s.res for s in staged if s.res.check_cmd] + [r for r in others if r.check_cmd]
    if not checks:
        return
    with tempfile.TemporaryDirectory(prefix=".check-", dir=staged[0].res.dest.parent) as tmp:
        sources = [(s.res, s.stage if s.changed else s.res.dest) for s in staged]
        sources += [(r, r.dest) for r in others]
        for res_, src in sources:
            if src.exists():
                shutil.copyfile(src, Path(tmp) / res_.dest.name)
        for r in checks:
            target = Path(tmp) / r.dest.name
            res = _run(r.check_cmd.replace("{{.src}}", str(target)))
            if res.returncode != 0:
                msg = (res.stderr or res.stdout).strip().replace(tmp + "/", "")
                raise CheckFailed(f"{r.dest.name}: {msg or f'exit {res.returncode}'}")


def install_set(
    files: list[tuple[TemplateResource, str]],
    others: list[TemplateResource] = (),  # type: ignore[assignment]
    keep_stage: bool = False,
    noop: bool = False,
) -> bool:
    """Install one daemon's rendered files; True when anything changed (and was reloaded)."""
    staged = [_stage(res, text) for res, text in files]
    try:
        changed = [s for s in staged if s.changed]
        if not changed:
            return False
        check_set(staged, list(others))
        if noop:
            for s in changed:
                log.info("Noop mode: %s would be updated", s.res.dest)
            return False
        for s in changed:
            try:
                os.replace(s.stage, s.res.dest)
            except OSError as exc:  # e.g. a bind-mounted file: "device or resource busy"
                log.warning("Rename onto %s failed (%s); writing in place", s.res.dest, exc)
                s.res.dest.write_bytes(s.stage.read_bytes())
            log.info("Target config %s has been updated", s.res.dest)
        # One reload per BIRD instance, whichever of its files changed.
        cmds = [s.res.reload_cmd for s in changed] + [s.res.reload_cmd for s in staged]
        cmds += [r.reload_cmd for r in others]
        reload = next((c for c in cmds if c), "")
        res = _run(reload)
        if res.returncode != 0:
            log.warning(
                "Reload command %r failed (exit %d): %s",
                reload,
                res.returncode,
                (res.stderr or res.stdout).strip(),
            )
        return True
    finally:
        if not keep_stage:
            for s in staged:
                s.stage.unlink(missing_ok=True)
