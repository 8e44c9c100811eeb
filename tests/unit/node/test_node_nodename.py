"""Node name resolution order: NODENAME, nodename file, HOSTNAME, OS hostname."""

from __future__ import annotations

from pathlib import Path

import pytest

from calico.node.errors import NodeError
from calico.node.nodename import determine_node_name, read_nodename_file, write_nodename_file


def _env(tmp_path: Path, **kw: str) -> dict[str, str]:
    return {"CALICO_NODENAME_FILE": str(tmp_path / "nodename"), **kw}


def test_nodename_env_wins(tmp_path: Path) -> None:
    (tmp_path / "nodename").write_text("from-file")
    env = _env(tmp_path, NODENAME=" explicit ", HOSTNAME="HOST")
    assert determine_node_name(env, lambda: "os") == "explicit"


def test_file_before_hostname(tmp_path: Path) -> None:
    (tmp_path / "nodename").write_text("from-file\n")
    assert determine_node_name(_env(tmp_path, HOSTNAME="HOST"), lambda: "os") == "from-file"


def test_hostname_env_is_lowercased(tmp_path: Path) -> None:
    assert determine_node_name(_env(tmp_path, HOSTNAME=" MyHost "), lambda: "os") == "myhost"


def test_os_hostname_last(tmp_path: Path) -> None:
    assert determine_node_name(_env(tmp_path), lambda: "Box.Example") == "box.example"


def test_no_name_at_all(tmp_path: Path) -> None:
    with pytest.raises(NodeError, match="NODENAME"):
        determine_node_name(_env(tmp_path), lambda: "")


def test_write_then_read_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "nodename"
    write_nodename_file(path, "n1")
    assert path.read_text() == "n1"
    assert read_nodename_file(path) == "n1"
    assert read_nodename_file(tmp_path / "missing") == ""
