"""The health HTTP server over a real loopback socket, and the serve() lifecycle."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
import requests

from calico.health import HealthAggregator, HealthServer


@pytest.fixture
def agg() -> HealthAggregator:
    return HealthAggregator()


@pytest.fixture
def server(agg: HealthAggregator) -> Iterator[HealthServer]:
    s = HealthServer(agg)
    yield s
    s.serve(False)


def _start(server: HealthServer, host: str = "127.0.0.1", port: int = 0) -> int:
    server.serve(True, host, port)
    assert server.wait_bound(5)
    assert server.port is not None
    return server.port


def test_endpoints_good_and_bad(agg: HealthAggregator, server: HealthServer) -> None:
    agg.register_reporter("felix", live=True, ready=True, timeout=0)
    port = _start(server)
    base = f"http://127.0.0.1:{port}"
    r = requests.get(f"{base}/liveness", timeout=5)
    assert r.status_code == 200
    assert "| felix     | -       | reporting live | reporting non-ready |" in r.text
    assert r.headers["Content-Type"].startswith("text/plain")
    r = requests.get(f"{base}/readiness", timeout=5)
    assert r.status_code == 503
    assert "reporting non-ready" in r.text
    agg.report("felix", live=True, ready=True)
    assert requests.get(f"{base}/readiness", timeout=5).status_code == 200
    agg.report("felix", live=False, ready=True)
    assert requests.get(f"{base}/liveness", timeout=5).status_code == 503


def test_method_not_checked_and_404(server: HealthServer) -> None:
    port = _start(server)
    base = f"http://127.0.0.1:{port}"
    assert requests.post(f"{base}/readiness", timeout=5).status_code == 200
    r = requests.get(f"{base}/other", timeout=5)
    assert r.status_code == 404
    assert r.text == "404 page not found\n"
    assert requests.get(f"{base}/", timeout=5).status_code == 404


def test_already_running_ignores_new_address(server: HealthServer) -> None:
    port = _start(server)
    server.serve(True, "127.0.0.1", port + 1)  # ignored: still on the first port
    assert server.port == port
    assert requests.get(f"http://127.0.0.1:{port}/liveness", timeout=5).status_code == 200


def test_disable_stops_and_reenable_moves(server: HealthServer) -> None:
    port = _start(server)
    server.serve(False)
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/liveness", timeout=2)
    server.serve(False)  # no-op when stopped
    port2 = _start(server)
    assert requests.get(f"http://127.0.0.1:{port2}/liveness", timeout=5).status_code == 200


def test_retries_bind_until_port_is_free(server: HealthServer) -> None:
    blocker = socket.socket()
    blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    port = blocker.getsockname()[1]
    server.serve(True, "127.0.0.1", port)
    assert not server.wait_bound(1.3)  # at least one failed attempt and a retry
    blocker.close()
    assert server.wait_bound(5)
    assert requests.get(f"http://127.0.0.1:{port}/liveness", timeout=5).status_code == 200


def test_disable_while_retrying_stops_retry_loop(server: HealthServer) -> None:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    port = blocker.getsockname()[1]
    try:
        server.serve(True, "127.0.0.1", port)
        time.sleep(0.2)
        start = time.monotonic()
        server.serve(False)
        assert time.monotonic() - start < 3
    finally:
        blocker.close()
    assert not server.wait_bound(1.5)


def test_default_host_is_localhost(server: HealthServer) -> None:
    server.serve(True, port=0)
    assert server.wait_bound(5)
    r = requests.get(f"http://localhost:{server.port}/readiness", timeout=5)
    assert r.status_code == 200


def test_empty_host_listens_everywhere(server: HealthServer) -> None:
    server.serve(True, "", 0)
    assert server.wait_bound(5)
    assert requests.get(f"http://127.0.0.1:{server.port}/liveness", timeout=5).status_code == 200
