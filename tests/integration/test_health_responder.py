"""calico.health.responder against the http.server handler it replaced: same raw request,
same reply bytes (the ``Date`` value aside), over real loopback sockets."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calico.health import HealthAggregator, HealthServer
from calico.health.responder import _PHRASES, MAX_HEADERS, MAX_LINE, http_date, phrases
from calico.health.server import METHODS

DATE = re.compile(rb"\r\nDate: [^\r]*\r\n")


def _old_handler(aggregator: HealthAggregator) -> type[BaseHTTPRequestHandler]:
    """The handler calico.health.server used before the responder (the reference)."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "calico-health"
        sys_version = ""

        def _respond(self) -> None:
            path = self.path.split("?", 1)[0]
            if path not in ("/liveness", "/readiness"):
                self._send(404, "404 page not found\n")
                return
            summary = aggregator.summary()
            good = summary.live if path == "/liveness" else summary.ready
            status = 503
            if good:
                status = 200 if summary.detail else 204
            self._send(status, summary.detail)

        def _send(self, status: int, body: str) -> None:
            data = body.encode() if status != 204 else b""
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _respond

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


class Pair:
    """The old server and the new one for one aggregator in ``state``: ``none`` (no
    reporter) or a reporter's live and ready flags as two letters (``yn``: live, not ready)."""

    def __init__(self, state: str) -> None:
        self.agg = HealthAggregator()
        if state != "none":
            self.agg.register_reporter("felix", live=True, ready=True, timeout=0)
            self.agg.report("felix", live=state[0] == "y", ready=state[1] == "y")
        self.old = ThreadingHTTPServer(("127.0.0.1", 0), _old_handler(self.agg))
        self.old.daemon_threads = True
        self._thread = threading.Thread(target=self.old.serve_forever, daemon=True)
        self._thread.start()
        self.new = HealthServer(self.agg)
        self.new.serve(True, "127.0.0.1", 0)
        assert self.new.wait_bound(5)

    def close(self) -> None:
        self.new.serve(False)
        self.old.shutdown()
        self.old.server_close()

    def replies(self, raw: bytes) -> tuple[bytes, bytes]:
        old_port = self.old.server_address[1]
        assert self.new.port is not None
        return exchange(old_port, raw), exchange(self.new.port, raw)


def exchange(port: int, raw: bytes) -> bytes:
    """Send ``raw``, close our sending side (so a header read ends), read to EOF."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(raw)
        s.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return DATE.sub(b"\r\nDate: -\r\n", b"".join(chunks))


STATES = ("none", "yy", "yn", "ny")


@pytest.fixture(scope="module")
def pairs() -> Iterator[dict[str, Pair]]:
    made = {state: Pair(state) for state in STATES}
    yield made
    for p in made.values():
        p.close()


CASES = [
    b"GET /liveness HTTP/1.0\r\n\r\n",
    b"GET /readiness HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n",
    b"HEAD /readiness HTTP/1.1\r\n\r\n",
    b"POST /readiness?verbose=1 HTTP/1.1\r\nContent-Length: 3\r\n\r\n",
    b"GET //liveness HTTP/1.1\r\n\r\n",
    b"GET /other HTTP/1.1\r\n\r\n",
    b"HEAD /other HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\n\r\n",
    b"FOO /liveness HTTP/1.1\r\n\r\n",
    b"get /liveness HTTP/1.1\r\n\r\n",
    b"GET /liveness HTTP/2.0\r\n\r\n",
    b"GET /liveness HTTP/1\r\n\r\n",
    b"GET /liveness HTTP/1.x\r\n\r\n",
    b"GET /liveness HTTP/12345678901.1\r\n\r\n",
    b"GET /liveness FTP/1.0\r\n\r\n",
    b"GET /liveness\r\n\r\n",
    b"GET /liveness HTTP/0.9\r\n\r\n",  # as sent: no status line either
    b"POST /liveness\r\n\r\n",
    b"GET\r\n\r\n",
    b"GET /a /b HTTP/1.1\r\n\r\n",
    b"GET /a /b <&> HTTP/1.1\r\n\r\n",
    b"GET /<script> HTTP/1.1\r\n\r\n",
    b"\r\n",
    b"",
    b"   \r\n",
    b"GET /liveness HTTP/1.0\n\n",
    b"GET /liveness HTTP/1.0\r\n",  # EOF ends the headers
    b"GET /liveness HTTP/1.0\r\nBad header line\r\n\r\n",
    b"GET /\xe9t\xe9 HTTP/1.1\r\n\r\n",
    b"\xff\xfe /liveness HTTP/1.1\r\n\r\n",
    b"GET /liveness HTTP/1.1\r\n" + b"X-A: 1\r\n" * (MAX_HEADERS - 1) + b"\r\n",  # 100 lines
    b"GET /liveness HTTP/1.1\r\n" + b"X-A: 1\r\n" * (MAX_HEADERS + 1),  # 101: too many
    b"GET /liveness HTTP/1.1\r\n" + b"X-A: " + b"a" * (MAX_LINE - 7) + b"\r\n\r\n",  # at limit
    b"GET /liveness HTTP/1.1\r\nX-A: " + b"a" * (MAX_LINE + 1 - 5),  # header line too long
    b"GET /" + b"a" * (MAX_LINE - 6) + b"\n\r\n",  # request line exactly at the limit
    b"GET /" + b"a" * (MAX_LINE + 1 - 5),  # request line too long: 414
]


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("raw", CASES, ids=range(len(CASES)))
def test_same_bytes_as_http_server(pairs: dict[str, Pair], raw: bytes, state: str) -> None:
    old, new = pairs[state].replies(raw)
    assert new == old
    if raw.startswith(b"GET /liveness HTTP/1.0\r\n\r\n"):
        assert new.startswith(b"HTTP/1.0 ")  # the comparison sees real replies


_WORD = st.sampled_from(
    ["GET", "HEAD", "POST", "OPTIONS", "PATCH", "FOO", "/liveness", "/readiness", "//readiness",
     "/readiness?x=1", "/x", "HTTP/1.0", "HTTP/1.1", "HTTP/2.0", "HTTP/0.9", "HTTP/1.", "HTTP/",
     "http/1.1", "HTTP/1.1.1", "é", "<b>", "&", "'", '"']
)  # fmt: skip
_SEP = st.sampled_from([" ", "  ", "\t", " \x0b "])
_HEADER = st.sampled_from([b"Host: a\r\n", b"Connection: close\r\n", b"Expect: 100-continue\r\n",
                           b"X: \xff\r\n", b"no colon\r\n", b" folded\r\n"])  # fmt: skip
_END = st.sampled_from([b"\r\n\r\n", b"\n\n", b"\r\n", b"", b"\n"])


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    words=st.lists(_WORD, min_size=0, max_size=5),
    seps=st.lists(_SEP, min_size=5, max_size=5),
    headers=st.lists(_HEADER, max_size=3),
    end=_END,
    state=st.sampled_from(STATES),
)
def test_generated_requests_same_bytes(
    pairs: dict[str, Pair],
    words: list[str],
    seps: list[str],
    headers: list[bytes],
    end: bytes,
    state: str,
) -> None:
    line = "".join(w + s for w, s in zip(words, seps, strict=False)).rstrip(" ")
    head = line.encode("latin-1")
    raw = head + (b"\r\n" + b"".join(headers) + end if headers else end)
    old, new = pairs[state].replies(raw)
    assert new == old


def test_methods_are_the_old_handlers() -> None:
    handler = _old_handler(HealthAggregator())
    assert sorted(m[3:] for m in dir(handler) if m.startswith("do_")) == sorted(METHODS)


@given(st.floats(min_value=0, max_value=2**33))
def test_http_date_matches_email_utils(ts: float) -> None:
    from email.utils import formatdate

    assert http_date(ts) == formatdate(ts, usegmt=True)


def test_shutdown_before_serving_and_close() -> None:
    from calico.health.responder import Listener

    listener = Listener(socket.AF_INET, ("127.0.0.1", 0), lambda c, p: (200, [], b""), ["GET"], "x")
    listener.shutdown()  # never served: returns at once
    listener.serve_forever()  # asked to stop already: returns at once
    listener.server_close()
    with pytest.raises(OSError):
        socket.create_connection(listener.server_address, timeout=2).close()


def test_phrases_are_http_status() -> None:
    from http import HTTPStatus

    for code in _PHRASES:
        assert phrases(code) == (HTTPStatus(code).phrase, HTTPStatus(code).description)
    assert phrases(418) == (HTTPStatus(418).phrase, HTTPStatus(418).description)  # not listed
    assert phrases(299) is None


def test_other_statuses_from_a_responder() -> None:
    """Statuses outside the table: http.server's phrase, or none for an unknown code."""
    from calico.health.responder import Listener

    for status, line in ((418, b"HTTP/1.0 418 I'm a Teapot\r\n"), (299, b"HTTP/1.0 299 \r\n")):
        listener = Listener(
            socket.AF_INET, ("127.0.0.1", 0), lambda c, p, s=status: (s, [], b"x"), ["GET"], "v"
        )
        t = threading.Thread(target=listener.serve_forever, daemon=True)
        t.start()
        try:
            reply = exchange(listener.server_address[1], b"GET / HTTP/1.0\r\n\r\n")
        finally:
            listener.shutdown()
            listener.server_close()
        assert reply == line + b"Server: v\r\nDate: -\r\n\r\nx"
