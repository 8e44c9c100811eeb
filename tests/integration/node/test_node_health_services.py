"""``node health`` against a live health server, and ``node-services`` updating the Node."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
from node_netns import NODE_CIDR, NodeHost, ip

from calico.health import HealthAggregator, HealthServer

pytestmark = pytest.mark.root


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def felix() -> Iterator[tuple[HealthAggregator, int]]:
    agg = HealthAggregator()
    agg.register_reporter("dataplane", live=True, ready=True)
    port = _free_port()
    server = HealthServer(agg)
    server.serve(True, "127.0.0.1", port)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    try:
        yield agg, port
    finally:
        server.serve(False)


def _health(calico: str, port: int, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {"FELIX_HEALTHHOST": "127.0.0.1", "FELIX_HEALTHPORT": str(port), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [calico, "component", "node", "health", *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_felix_ready_and_not_ready(calico_bin: str, felix: tuple[HealthAggregator, int]) -> None:
    agg, port = felix
    assert _health(calico_bin, port, "--felix-ready").returncode == 1  # not reported yet
    agg.report("dataplane", live=True, ready=True)
    ok = _health(calico_bin, port, "--felix-ready", "--felix-live")
    assert ok.returncode == 0, ok.stderr
    agg.report("dataplane", live=True, ready=False)
    bad = _health(calico_bin, port, "--felix-ready")
    assert bad.returncode == 1
    assert "calico/node is not ready: felix is not ready: readiness probe reporting 503" in (
        bad.stderr
    )
    assert _health(calico_bin, port, "--felix-live").returncode == 0


def test_felix_unreachable(calico_bin: str) -> None:
    res = _health(calico_bin, _free_port(), "--felix-ready", "--threshold-time", "2s")
    assert res.returncode == 1
    assert "felix is not ready: cannot reach Felix at http://127.0.0.1:" in res.stderr
    assert "Traceback" not in res.stderr


def test_node_services_follows_address_changes(host: NodeHost) -> None:
    assert host.run("startup", IP="autodetect").returncode == 0
    proc = subprocess.Popen(
        host.argv("node-services"),
        env=host.env(IP="autodetect", AUTODETECT_POLL_INTERVAL="200ms"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        ip("-n", host.ns, "addr", "del", NODE_CIDR, "dev", "eth9")
        ip("-n", host.ns, "addr", "add", "10.66.0.9/16", "dev", "eth9")
        deadline = time.monotonic() + 15
        addr = None
        while time.monotonic() < deadline:
            addr = host.query(lambda c: c.get("Node", "node-a").spec.bgp.ipv4_address)
            if addr == "10.66.0.9/16":
                break
            time.sleep(0.2)
        assert addr == "10.66.0.9/16"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
        assert proc.returncode == 0, out
        assert "Traceback" not in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
