"""``calico node run``'s service dir: the resident CNI helper and its per-node socket."""

from __future__ import annotations

import socket
from pathlib import Path

from calico.node.run import services
from calico.node.run.layout import NodeSettings, layout_for, remove_stale_socket


def test_cni_daemon_is_enabled_with_the_cni_component() -> None:
    assert "cni-daemon" in services.enabled_services({"cni": "x", "felix": "y"})
    assert "cni-daemon" not in services.enabled_services({"felix": "y"})


def test_socket_lives_in_the_state_dir_and_reaches_the_services(tmp_path: Path) -> None:
    layout = layout_for(tmp_path / "state")
    settings = NodeSettings(state_dir=str(layout.state_dir), log_dir=str(tmp_path / "log"))
    sock = str(layout.state_dir / "cni-daemon.sock")
    assert services.cni_daemon_socket(layout) == sock
    assert services.service_env(settings, layout)["CALICO_CNI_DAEMON_SOCKET"] == sock


def test_too_long_socket_path_disables_the_daemon(tmp_path: Path) -> None:
    layout = layout_for(tmp_path / ("d" * 120))
    settings = NodeSettings(state_dir=str(layout.state_dir), log_dir=str(tmp_path / "log"))
    assert services.cni_daemon_socket(layout) is None
    assert services.service_env(settings, layout)["CALICO_CNI_DAEMON_SOCKET"] == "off"


def test_remove_stale_socket_removes_only_sockets(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
    remove_stale_socket(path)
    assert not path.exists()
    path.write_text("not a socket")
    remove_stale_socket(path)
    assert path.exists()
    remove_stale_socket(tmp_path / "missing")  # no error
