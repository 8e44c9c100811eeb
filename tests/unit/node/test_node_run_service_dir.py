"""``calico node run``'s service dir: which services, the resident CNI helper and its socket."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from calico.cli.components import COMPONENTS
from calico.node.errors import NodeError
from calico.node.run import service_dir
from calico.node.run.layout import NodeSettings, layout_for, remove_stale_socket

# The image services that run a binary of their own rather than a ``calico component``.
BINARIES = {"bird": "bird", "bird6": "bird6"}


def test_enabled_services_run_registered_components() -> None:
    base = ["felix", "node-services", "cni-daemon"]
    flows = ["goldmane", "whisker-backend"]
    assert service_dir.enabled_services("vxlan") == [*base, *flows]
    assert service_dir.enabled_services("none") == [*base, *flows]
    assert service_dir.enabled_services() == [*base, *flows]
    # BIRD_SERVICES order, after felix (design/confd.md "Node run wiring").
    assert service_dir.enabled_services("bird") == [*base, "confd", "bird", "bird6", *flows]
    components = {c for c in service_dir.SERVICE_COMPONENTS.values() if c is not None}
    assert components <= set(COMPONENTS)


def test_every_image_service_is_enabled_once_its_component_exists() -> None:
    """Every service the image ships runs on some backend, each through a registered
    component or its own binary: confd and bird joined once ``calico component confd`` did."""
    templates = {p.name for p in service_dir.available_dir().iterdir() if (p / "run").is_file()}
    everywhere = {svc for b in ("vxlan", "bird", "none") for svc in service_dir.enabled_services(b)}
    assert templates == everywhere == set(service_dir.SERVICE_COMPONENTS)
    for svc, component in service_dir.SERVICE_COMPONENTS.items():
        assert component in COMPONENTS if component is not None else svc in BINARIES


def test_bird_backend_keeps_confd_and_sockets_in_the_state_dir(tmp_path: Path) -> None:
    layout = layout_for(tmp_path / "state")
    settings = NodeSettings(
        state_dir=str(layout.state_dir), log_dir=str(tmp_path / "log"), networking_backend="bird"
    )
    available = service_dir.available_dir()
    service_dir.build_service_dir(settings, layout, service_dir.enabled_services("bird"), available)
    confd = layout.state_dir / "confd"
    assert sorted(p.name for p in confd.iterdir()) == ["conf.d", "config", "templates"]
    assert (confd / "templates" / "bird.cfg.template").is_file()
    env = service_dir.service_env(settings, layout)
    assert env["CALICO_CONFD_DIR"] == str(confd)
    assert env["CALICO_BIRD_SOCKET"] == str(layout.state_dir / "bird.ctl")
    assert env["CALICO_BIRD6_SOCKET"] == str(layout.state_dir / "bird6.ctl")
    assert env["CALICO_CONFD_STATUS_FILE"] == str(layout.state_dir / "confd-status.json")
    assert env["SVDIR"] == str(layout.service_dir)
    assert "FELIX_VXLANENABLED" not in env
    for svc in ("confd", "bird", "bird6"):
        run = (layout.service_dir / svc / "run").read_text()
        assert f"export CALICO_BIRD_SOCKET={layout.state_dir / 'bird.ctl'}\n" in run
        assert run.endswith(f"exec /bin/sh {available / svc / 'run'}\n")


def test_other_backends_have_no_bird_environment(tmp_path: Path) -> None:
    layout = layout_for(tmp_path / "state")
    for backend in ("vxlan", "none"):
        settings = NodeSettings(state_dir=str(layout.state_dir), networking_backend=backend)
        env = service_dir.service_env(settings, layout)
        assert not {k for k in env if "BIRD" in k or k in ("SVDIR", "CALICO_CONFD_DIR")}
        assert ("FELIX_VXLANENABLED" in env) == (backend == "vxlan")


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


def test_goldmane_and_whisker_get_their_own_ports(tmp_path: Path) -> None:
    """Both components read upstream's PORT; the image's scripts map the node's names."""
    layout = layout_for(tmp_path / "state")
    settings = NodeSettings(state_dir=str(layout.state_dir), goldmane_port=7555, whisker_port=8555)
    env = service_dir.service_env(settings, layout)
    assert (env["GOLDMANE_PORT"], env["WHISKER_PORT"]) == ("7555", "8555")
    assert settings.whisker_url() == "http://127.0.0.1:8555/"
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "calico").write_text('#!/bin/sh\necho "$@ PORT=$PORT HOST=$HOST GM=$GOLDMANE_HOST"\n')
    (stub / "calico").chmod(0o755)
    available = service_dir.available_dir()
    base = {"PATH": f"{stub}:/usr/bin:/bin", "GOLDMANE_PORT": "7555", "WHISKER_PORT": "8555"}
    out = {
        svc: subprocess.run(
            ["/bin/sh", str(available / svc / "run")],
            env=base,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for svc in ("goldmane", "whisker-backend")
    }
    assert out["goldmane"].startswith("component goldmane PORT=7555 ")
    assert out["whisker-backend"] == (
        "component whisker-backend PORT=8555 HOST=127.0.0.1 GM=127.0.0.1:7555"
    )
