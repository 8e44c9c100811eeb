"""Version, build date and git commit for ``calico version``.

A built distribution may ship ``calico/_buildinfo.json`` (written by its build step); a source
checkout asks git. Anything unknown says so rather than inventing a value.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import calico

_PKG_DIR = Path(calico.__file__).resolve().parent


@dataclass(frozen=True)
class BuildInfo:
    version: str
    build_date: str
    git_commit: str


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(_PKG_DIR), *args],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def build_info() -> BuildInfo:
    stamp = _PKG_DIR / "_buildinfo.json"
    if stamp.is_file():
        try:
            data = json.loads(stamp.read_text())
            return BuildInfo(
                version=calico.__version__,
                build_date=str(data.get("build_date", "unknown")),
                git_commit=str(data.get("git_commit", "unknown")),
            )
        except (OSError, ValueError):
            pass
    commit = _git("rev-parse", "HEAD") or "unknown"
    date = _git("log", "-1", "--format=%cI") if commit != "unknown" else None
    return BuildInfo(calico.__version__, date or "unknown", commit)


def version_text() -> str:
    """What ``calico version`` and every daemon's ``--version`` print (three lines)."""
    info = build_info()
    return (
        f"Version:     {info.version}\nBuild date:  {info.build_date}\n"
        f"Git commit:  {info.git_commit}"
    )
