"""The health HTTP server over a real loopback socket, and the serve() lifecycle."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
import requests

from calico.health import HealthAggregator, HealthServer


def _server(agg: HealthAggregator) -> HealthServer:
    server = agg.server
    assert isinstance(server, HealthServer)
    return server


@pytest.fixture
def agg() -> Iterator[HealthAggregator]:
    a = HealthAggregator()
    yield a
    a.serve(False)


def _start(agg: HealthAggregator, host: str = "127.0.0.1", port: int = 0) -> int:
    agg.serve(True, host, port)
    server = _server(agg)
    assert server.wait_bound(5)
    assert server.port is not None
    return server.port


def test_endpoints_good_and_bad(agg: HealthAggregator) -> None:
    agg.register_reporter("felix", live=True, ready=True, timeout=0)
    port = _start(agg)
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


def test_method_not_checked_and_404(agg: HealthAggregator) -> None:
    port = _start(agg)
    base = f"http://127.0.0.1:{port}"
    assert requests.post(f"{base}/readiness", timeout=5).status_code == 200
    r = requests.get(f"{base}/other", timeout=5)
    assert r.status_code == 404
    assert r.text == "404 page not found\n"
    assert requests.get(f"{base}/", timeout=5).status_code == 404


def test_already_running_ignores_new_address(agg: HealthAggregator) -> None:
    port = _start(agg)
    agg.serve(True, "127.0.0.1", port + 1)  # ignored: still on the first port
    assert _server(agg).port == port
    assert requests.get(f"http://127.0.0.1:{port}/liveness", timeout=5).status_code == 200


def test_disable_stops_and_reenable_moves(agg: HealthAggregator) -> None:
    port = _start(agg)
    agg.serve(False)
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/liveness", timeout=2)
    agg.serve(False)  # no-op when stopped
    port2 = _start(agg)
    assert requests.get(f"http://127.0.0.1:{port2}/liveness", timeout=5).status_code == 200


def test_retries_bind_until_port_is_free(agg: HealthAggregator) -> None:
    blocker = socket.socket()
    blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    port = blocker.getsockname()[1]
    agg.serve(True, "127.0.0.1", port)
    server = _server(agg)
    assert not server.wait_bound(1.3)  # at least one failed attempt and a retry
    blocker.close()
    assert server.wait_bound(5)
    assert requests.get(f"http://127.0.0.1:{port}/liveness", timeout=5).status_code == 200


def test_disable_while_retrying_stops_retry_loop(agg: HealthAggregator) -> None:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    port = blocker.getsockname()[1]
    try:
        agg.serve(True, "127.0.0.1", port)
        time.sleep(0.2)
        start = time.monotonic()
        agg.serve(False)
        assert time.monotonic() - start < 3
    finally:
        blocker.close()
    assert not _server(agg).wait_bound(1.5)


def test_default_host_is_localhost(agg: HealthAggregator) -> None:
    agg.serve(True, port=0)
    server = _server(agg)
    assert server.wait_bound(5)
    r = requests.get(f"http://localhost:{server.port}/readiness", timeout=5)
    assert r.status_code == 200


def test_empty_host_listens_everywhere(agg: HealthAggregator) -> None:
    agg.serve(True, "", 0)
    server = _server(agg)
    assert server.wait_bound(5)
    assert requests.get(f"http://127.0.0.1:{server.port}/liveness", timeout=5).status_code == 200
