"""``calico node run``'s service dir: which services, the resident CNI helper and its socket."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from calico.cli.components import COMPONENTS
from calico.node.errors import NodeError
from calico.node.run import service_dir
from calico.node.run.layout import NodeSettings, layout_for, remove_stale_socket

# Image services the node does not run yet, and the component each waits for.
NOT_YET = {"confd": "confd", "bird": "confd", "bird6": "confd"}


def test_enabled_services_run_registered_components() -> None:
    assert service_dir.enabled_services() == ["felix", "node-services", "cni-daemon"]
    assert set(service_dir.SERVICE_COMPONENTS.values()) <= set(COMPONENTS)


def test_every_image_service_is_enabled_once_its_component_exists() -> None:
    """When ``calico component confd`` is registered, confd and bird must join the node."""
    templates = {p.name for p in service_dir.available_dir().iterdir() if (p / "run").is_file()}
    assert templates == set(service_dir.SERVICE_COMPONENTS) | set(NOT_YET)
    assert not set(NOT_YET.values()) & set(COMPONENTS)


def test_socket_lives_in_the_state_dir_and_reaches_the_daemon(tmp_path: Path) -> None:
    layout = layout_for(tmp_path / "state")
    settings = NodeSettings(state_dir=str(layout.state_dir), log_dir=str(tmp_path / "log"))
    sock = str(layout.state_dir / "cni-daemon.sock")
    assert service_dir.cni_daemon_socket(layout) == sock
    available = service_dir.available_dir()
    service_dir.build_service_dir(settings, layout, service_dir.enabled_services(), available)
    run = (layout.service_dir / "cni-daemon" / "run").read_text()
    assert run.endswith(f"exec /bin/sh {available / 'cni-daemon' / 'run'} {sock}\n")
    felix = (layout.service_dir / "felix" / "run").read_text()
    cfg = layout.state_dir / "felix.cfg"
    assert felix.endswith(f"exec /bin/sh {available / 'felix' / 'run'} --config-file {cfg}\n")
    # The node's own copy of the image's felix.cfg (never the host's /etc/calico/felix.cfg).
    assert cfg.read_text() == (available.parent.parent / "calico" / "felix.cfg").read_text()
    assert "LogFilePath = None" in cfg.read_text()


def test_too_long_socket_path_disables_the_daemon(tmp_path: Path) -> None:
    layout = layout_for(tmp_path / ("d" * 120))
    settings = NodeSettings(state_dir=str(layout.state_dir), log_dir=str(tmp_path / "log"))
    assert service_dir.cni_daemon_socket(layout) is None
    with pytest.raises(NodeError, match="too long for a unix socket"):
        service_dir.build_service_dir(settings, layout, ["cni-daemon"], service_dir.available_dir())


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
