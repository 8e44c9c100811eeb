"""The /liveness and /readiness HTTP endpoints, served for one aggregator.

The daemon builds the server around its aggregator (``HealthServer(aggregator)``); the
aggregator knows nothing of HTTP. ``serve(enabled, host, port)`` follows upstream: while wanted,
a server that fails to bind (port in use) is retried every second; a call while running is a
no-op even if host/port differ (callers move it by disabling then enabling); disabling stops
and forgets it. Requests are answered by :mod:`calico.health.responder` (the bytes
``http.server`` wrote, without its import chain).
"""

from __future__ import annotations

import logging
import socket
import threading

from calico.health.aggregator import HealthAggregator
from calico.health.responder import Listener, Respond, Response

log = logging.getLogger(__name__)

STATUS_GOOD = 200
STATUS_GOOD_NO_CONTENT = 204
STATUS_BAD = 503
RETRY_INTERVAL = 1.0
SERVER_VERSION = "calico-health "  # http.server's "<server_version> <sys_version>", sys empty
# Upstream does not check the method; these are the ones the http.server handler answered.
METHODS = ("GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS")


def make_responder(aggregator: HealthAggregator) -> Respond:
    """``respond(command, path)`` for :class:`calico.health.responder.Listener`."""

    def respond(command: str, raw_path: str) -> Response:
        path = raw_path.split("?", 1)[0]
        if path not in ("/liveness", "/readiness"):
            return _reply(command, 404, "404 page not found\n")
        summary = aggregator.summary()
        good = summary.live if path == "/liveness" else summary.ready
        status = STATUS_BAD
        if good:
            status = STATUS_GOOD if summary.detail else STATUS_GOOD_NO_CONTENT
        return _reply(command, status, summary.detail)

    return respond


def _reply(command: str, status: int, body: str) -> Response:
    data = body.encode() if status != STATUS_GOOD_NO_CONTENT else b""
    headers = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(data)))]
    return status, headers, b"" if command == "HEAD" else data


def _family_for(host: str) -> tuple[socket.AddressFamily, str]:
    if host == "":
        return (socket.AF_INET6, "::") if socket.has_ipv6 else (socket.AF_INET, "0.0.0.0")
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    fam, _, _, _, addr = infos[0]
    return fam, str(addr[0])


class HealthServer:
    """Owns the HTTP server thread for one aggregator."""

    def __init__(self, aggregator: HealthAggregator) -> None:
        self._aggregator = aggregator
        self._lock = threading.Lock()
        self._wanted = threading.Event()
        self._thread: threading.Thread | None = None
        self._httpd: Listener | None = None
        self._bound = threading.Event()

    def serve(self, enabled: bool, host: str = "localhost", port: int = 9099) -> None:
        with self._lock:
            if enabled:
                if self._thread is not None:
                    log.info("Health enabled. Server is already running.")
                    return
                self._wanted.set()
                self._bound.clear()
                self._thread = threading.Thread(
                    target=self._run, args=(host, port), name="health-server", daemon=True
                )
                self._thread.start()
                return
            if self._thread is None:
                return
            log.info("Health disabled. Stopping server.")
            self._wanted.clear()
            thread, self._thread = self._thread, None
            httpd = self._httpd
        if httpd is not None:
            httpd.shutdown()
        thread.join(timeout=5)

    def _run(self, host: str, port: int) -> None:
        respond = make_responder(self._aggregator)
        while self._wanted.is_set():
            try:
                family, bind_host = _family_for(host)
                httpd = Listener(family, (bind_host, port), respond, METHODS, SERVER_VERSION)
            except OSError as exc:
                log.error("Health endpoint failed, trying to restart it... error=%s", exc)
                if not self._sleep_while_wanted(RETRY_INTERVAL):
                    return
                continue
            with self._lock:
                if not self._wanted.is_set():
                    httpd.server_close()
                    return
                self._httpd = httpd
            self._bound.set()
            log.info("Health endpoint listening host=%s port=%s", host, httpd.server_address[1])
            try:
                httpd.serve_forever()
            finally:
                httpd.server_close()
                with self._lock:
                    self._httpd = None
                self._bound.clear()

    def _sleep_while_wanted(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; False as soon as the server is no longer wanted."""
        pause = threading.Event()
        step = 0.05
        waited = 0.0
        while waited < seconds:
            if not self._wanted.is_set():
                return False
            pause.wait(step)
            waited += step
        return self._wanted.is_set()

    def wait_bound(self, timeout: float = 5.0) -> bool:
        """Block until the listener is bound (tests and start-up ordering)."""
        return self._bound.wait(timeout)

    @property
    def port(self) -> int | None:
        """The bound port (useful with port 0), or None while not listening."""
        httpd = self._httpd
        return int(httpd.server_address[1]) if httpd is not None else None
