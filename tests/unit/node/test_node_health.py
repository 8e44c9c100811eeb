"""Health flag logic, Felix endpoint settings and BIRD checks against a fake control socket."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from calico.node import bird, health
from calico.node.command import node_group

PROTOCOLS = (
    "0001 BIRD 1.6.8 ready.\n"
    "2002-name     proto    table    state  since       info\n"
    "1002-kernel1  Kernel   master   up     2016-11-21\n"
    " device1  Device   master   up     2016-11-21\n"
    " Mesh_172_17_8_102 BGP      master   up     2016-11-21  Established\n"
    " Node_172_17_8_103 BGP      master   start  2016-11-21  Active  Socket: refused\n"
    " Mesh_fd00__2 BGP      master   up     2016-11-21  Established\n"
    "0000 \n"
)
STATUS = (
    "0001 BIRD 1.6.8 ready.\n1000-BIRD 1.6.8\n1011-Router ID is 1.2.3.4\n"
    "0013 Daemon is up and running\n"
)
STATUS_GR = (
    "0001 BIRD 1.6.8 ready.\n1000-BIRD 1.6.8\n0024-Graceful restart recovery in progress\n"
    "  Waiting for 1 protocols to recover\n0013 Daemon is up and running\n"
)


class FakeBird:
    def __init__(self, path: str, protocols: str = PROTOCOLS, status: str = STATUS) -> None:
        self.protocols, self.status = protocols, status
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                cmd = conn.recv(1024).decode()
                reply = self.protocols if "protocols" in cmd else self.status
                conn.sendall(reply.encode())

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def run_dir(tmp_path: Path) -> Iterator[str]:
    d = tmp_path / "run"
    d.mkdir()
    yield str(d)


def test_parse_protocols_by_family() -> None:
    lines = PROTOCOLS.splitlines()
    v4 = bird.parse_protocols(lines, 4)
    assert [(p.ip, p.kind, p.bgp_state) for p in v4] == [
        ("172.17.8.102", "Mesh", "Established"),
        ("172.17.8.103", "Node", "Active"),
    ]
    assert [p.ip for p in bird.parse_protocols(lines, 6)] == ["fd00::2"]
    with pytest.raises(bird.BirdError, match="unknown BIRD table"):
        bird.parse_protocols(["2002-a b c"], 4)


def test_bird_ready_threshold_logic(run_dir: str) -> None:
    fake = FakeBird(os.path.join(run_dir, "bird.ctl"))
    try:
        now = time.time()
        # Young node: every peer must be up.
        young = health.check_bird_ready(4, 30, now - 5, run_dir)
        assert young == "BGP not established with 172.17.8.103"
        # Older node: one established peer is enough.
        assert health.check_bird_ready(4, 30, now - 60, run_dir) is None
        # IPv6 peers all up, no graceful restart.
        assert health.check_bird_ready(6, 30, now - 5, run_dir) is None
        fake.status = STATUS_GR
        assert health.check_bird_ready(6, 30, now - 5, run_dir) == "graceful restart in progress"
        assert health.check_bird_ready(4, 30, None, run_dir) is not None
    finally:
        fake.close()


def test_bird_ready_all_down_after_threshold(run_dir: str) -> None:
    down = PROTOCOLS.replace("Established", "Idle")
    fake = FakeBird(os.path.join(run_dir, "bird.ctl"), protocols=down)
    try:
        got = health.check_bird_ready(4, 30, time.time() - 60, run_dir)
        assert got == "BGP not established with 172.17.8.102,172.17.8.103"
    finally:
        fake.close()


def test_bird_not_running_is_explicit(run_dir: str, tmp_path: Path) -> None:
    why = health.check_bird_live(4, run_dir, str(tmp_path / "services"))
    assert why == f"BIRD is not running (no control socket at {run_dir}/bird.ctl)"
    assert "BIRD is not running" in (health.check_bird_ready(4, 30, time.time(), run_dir) or "")


def test_bird_live_over_socket(run_dir: str, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PATH", str(tmp_path))  # no birdcl, no sv: talk to the socket directly
    fake = FakeBird(os.path.join(run_dir, "bird.ctl"))
    try:
        assert health.check_bird_live(4, run_dir, str(tmp_path / "services")) is None
        fake.status = "0001 BIRD 1.6.8 ready.\n9001 nonsense\n"
        assert health.check_bird_live(4, run_dir, str(tmp_path)) == "bad response from bird"
    finally:
        fake.close()


def test_felix_endpoint_from_env() -> None:
    assert health.felix_endpoint({}, "readiness") == "http://localhost:9099/readiness"
    env = {"FELIX_HEALTHHOST": "::1", "FELIX_HEALTHPORT": "9199"}
    assert health.felix_endpoint(env, "liveness") == "http://[::1]:9199/liveness"
    with pytest.raises(ValueError, match="FELIX_HEALTHPORT"):
        health.felix_endpoint({"FELIX_HEALTHPORT": "x"}, "liveness")


def test_options_any() -> None:
    assert not health.HealthOptions().any()
    assert health.HealthOptions(bird6_live=True).any()


def test_cli_requires_a_check() -> None:
    res = CliRunner().invoke(node_group, ["health"])
    assert res.exit_code == 1
    assert "must specify at least one of" in res.output


def test_cli_bad_threshold() -> None:
    res = CliRunner().invoke(node_group, ["health", "--felix-ready", "--threshold-time", "soon"])
    assert res.exit_code == 2 and "invalid duration" in res.output


def test_cli_reports_each_failure(tmp_path: Path) -> None:
    env = {"FELIX_HEALTHPORT": "1", "CALICO_NODENAME_FILE": str(tmp_path / "nodename")}
    res = CliRunner().invoke(node_group, ["health", "--felix-live", "--felix-ready"], env=env)
    assert res.exit_code == 1
    lines = res.output.strip().splitlines()
    assert lines[0].startswith("calico/node is not ready: Felix is not live: cannot reach Felix")
    assert lines[1].startswith("calico/node is not ready: felix is not ready: cannot reach Felix")


def test_node_run_sockets_come_from_the_environment(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A node under ``calico node run`` exports its own sockets and runit tree; without them
    the image's paths (upstream's /var/run/calico/bird{,6}.ctl) apply."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no birdcl, no sv
    state = tmp_path / "state"
    state.mkdir()
    env = {
        "CALICO_BIRD_SOCKET": str(state / "bird.ctl"),
        "CALICO_BIRD6_SOCKET": str(state / "bird6.ctl"),
        "SVDIR": str(state / "service"),
        "CALICO_NODENAME_FILE": str(tmp_path / "missing-nodename"),
    }
    assert health.socket_from_env(4, env) == str(state / "bird.ctl")
    assert health.socket_from_env(6, env) == str(state / "bird6.ctl")
    assert health.socket_from_env(4, {}) in ("/var/run/calico/bird.ctl", "/var/run/bird/bird.ctl")
    opts = health.HealthOptions(bird_live=True, bird6_live=True)
    assert health.run_checks(opts, env) == [
        "calico/node is not ready: bird/confd is not live: BIRD is not running "
        f"(no control socket at {state}/bird.ctl)",
        "calico/node is not ready: bird6/confd is not live: BIRD is not running "
        f"(no control socket at {state}/bird6.ctl)",
    ]
    fake = FakeBird(str(state / "bird.ctl"))
    try:
        assert health.run_checks(health.HealthOptions(bird_live=True), env) == []
    finally:
        fake.close()


def _greeting_bird(path: Path, reply: str) -> threading.Thread:
    """BIRD's order: greeting first, then one reply per command (what calico.birdctl expects)."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)

    def run() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.sendall(b"0001 BIRD 1.6.8 ready.\n")
            conn.recv(1024)
            conn.sendall(reply.encode())
        srv.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("how", ["flag", "env"])
def test_calicoctl_node_status_reads_the_nodes_own_socket(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``calico node run`` keeps BIRD's sockets in its state dir: ``--bird-socket`` /
    ``CALICO_BIRD_SOCKET`` (and the v6 pair) point ``calicoctl node status`` at them."""
    from calico.calicoctl import node_status

    monkeypatch.setattr(node_status, "calico_running", lambda: True)
    sock, missing6 = tmp_path / "bird.ctl", tmp_path / "bird6.ctl"
    _greeting_bird(sock, PROTOCOLS.split("\n", 1)[1])
    env = {"CALICO_CONFD_STATUS_FILE": str(tmp_path / "none.json")}
    if how == "flag":
        args = ["--bird-socket", str(sock), "--bird6-socket", str(missing6)]
    else:
        args = []
        env.update(CALICO_BIRD_SOCKET=str(sock), CALICO_BIRD6_SOCKET=str(missing6))
    result = CliRunner().invoke(node_status.status_command, args, env=env)
    assert result.exit_code == 0, result.output
    assert "| 172.17.8.102 | node-to-node mesh | up    |" in result.output
    assert "| 172.17.8.103 | node specific     | start |" in result.output
    assert f"unable to connect to BIRDv6 socket: {missing6}: No such file" in result.output
