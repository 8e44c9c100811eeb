"""The demo prints commands that work as typed: the bare name only when PATH finds this
installation's script (``make setup``'s links), else the script's full path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from calico.node.run.demo import typed

MINE = Path(sys.executable).parent / "calicoctl"


def test_bare_name_when_path_links_to_this_venv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not MINE.exists():
        pytest.skip("needs the venv's calicoctl script")
    (tmp_path / "calicoctl").symlink_to(MINE)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert typed("calicoctl") == "calicoctl"


def test_full_path_when_path_finds_another_calicoctl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "calicoctl"
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert typed("calicoctl") == str(MINE)


def test_full_path_when_not_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert typed("calico") == str(Path(sys.executable).parent / "calico")
