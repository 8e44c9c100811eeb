"""`calico health` as a real process against a live aggregator server, every exit path."""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from calico.health import HealthAggregator, HealthServer


def run(calico_bin: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [calico_bin, "health", *args], capture_output=True, text=True, env=env, timeout=30
    )


@pytest.fixture
def live_server() -> Iterator[tuple[HealthAggregator, int]]:
    agg = HealthAggregator()
    agg.register_reporter("loop", live=True, ready=True)
    server = HealthServer(agg)
    server.serve(True, "127.0.0.1", 0)
    assert server.wait_bound(5)
    assert server.port is not None
    yield agg, server.port
    server.serve(False)


def test_ready_exit_0(calico_bin: str, clean_env: dict[str, str], live_server) -> None:
    agg, port = live_server
    agg.report("loop", live=True, ready=True)
    res = run(calico_bin, clean_env, "--host", "127.0.0.1", "--port", str(port))
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""


def test_not_ready_exit_1(calico_bin: str, clean_env: dict[str, str], live_server) -> None:
    _, port = live_server  # registered but never reported: not ready
    res = run(calico_bin, clean_env, "--host", "127.0.0.1", "--port", str(port))
    assert res.returncode == 1
    assert res.stderr.strip() == "Health check failed with status code: 503"


def test_liveness_type(calico_bin: str, clean_env: dict[str, str], live_server) -> None:
    agg, port = live_server
    args = ("--host", "127.0.0.1", "--port", str(port), "--type", "liveness")
    assert run(calico_bin, clean_env, *args).returncode == 0
    agg.report("loop", live=False, ready=False)
    res = run(calico_bin, clean_env, *args)
    assert res.returncode == 1
    assert "status code: 503" in res.stderr


def test_invalid_type(calico_bin: str, clean_env: dict[str, str], live_server) -> None:
    _, port = live_server
    res = run(calico_bin, clean_env, "--port", str(port), "--type", "startup")
    assert res.returncode == 1
    assert res.stderr.strip() == (
        'Invalid check type "startup", expected "readiness" or "liveness"'
    )


def test_connection_refused(calico_bin: str, clean_env: dict[str, str]) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    res = run(calico_bin, clean_env, "--host", "127.0.0.1", "--port", str(port))
    assert res.returncode == 1
    assert res.stderr.startswith(f'Health check failed: Get "http://127.0.0.1:{port}/readiness": ')
    assert "connection refused" in res.stderr
    assert "Traceback" not in res.stderr


def test_missing_port(calico_bin: str, clean_env: dict[str, str]) -> None:
    res = run(calico_bin, clean_env)
    assert res.returncode == 1
    assert res.stderr.startswith("Error: ")
    assert "--port" in res.stderr


def test_bad_timeout(calico_bin: str, clean_env: dict[str, str]) -> None:
    res = run(calico_bin, clean_env, "--port", "1", "--timeout", "soon")
    assert res.returncode == 1
    assert res.stderr.startswith("Health check failed: ")


class _SlowOrRedirect(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/readiness":
            self.send_response(302)
            self.send_header("Location", "/landing")
            self.end_headers()
        elif self.path == "/landing":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")
        else:  # /liveness hangs past the client's timeout
            threading.Event().wait(3)
            self.send_response(200)
            self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def odd_server() -> Iterator[int]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _SlowOrRedirect)
    httpd.daemon_threads = True
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def test_redirect_followed(calico_bin: str, clean_env: dict[str, str], odd_server: int) -> None:
    res = run(calico_bin, clean_env, "--host", "127.0.0.1", "--port", str(odd_server))
    assert res.returncode == 0, res.stderr


def test_timeout(calico_bin: str, clean_env: dict[str, str], odd_server: int) -> None:
    res = run(
        calico_bin,
        clean_env,
        "--host",
        "127.0.0.1",
        "--port",
        str(odd_server),
        "--type",
        "liveness",
        "--timeout",
        "300ms",
    )
    assert res.returncode == 1
    assert res.stderr.startswith("Health check failed: ")
    assert "deadline exceeded" in res.stderr
