"""A minimal HTTP/1.0 responder over plain sockets, byte-compatible with ``http.server``.

Why: ``http.server`` imports ``http.client``, ``email``, ``ssl``, ``socketserver``, ``html``
and ``mimetypes`` (~45 ms of a Felix start, design/performance.md "Cold start: the HTTP
stack and the BGP models") to answer two fixed paths. This module parses a request exactly as
``BaseHTTPRequestHandler`` does with its defaults (protocol ``HTTP/1.0``, one request per
connection, request line up to 65,536 bytes, at most 100 header lines, the same error
statuses, reason phrases and HTML error bodies, HTTP/0.9 replies without a status line) and
writes the same bytes; only the ``Date`` value differs with the clock.
``tests/integration/test_health_responder.py`` compares both on the same raw requests.
The caller supplies ``respond(command, path) -> (status, headers, body)`` for parsed requests
whose method it accepts; one daemon thread serves each connection, as ``ThreadingHTTPServer``
with ``daemon_threads`` did.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Collection
from typing import BinaryIO

log = logging.getLogger(__name__)

PROTOCOL = "HTTP/1.0"
MAX_LINE = 65536  # http.client._MAXLINE; the request line is read with the same limit
MAX_HEADERS = 100  # http.client._MAXHEADERS, counted with the terminating blank line
LISTEN_BACKLOG = 5  # socketserver.TCPServer.request_queue_size
ERROR_CONTENT_TYPE = "text/html;charset=utf-8"
ERROR_BODY = """\
<!DOCTYPE HTML>
<html lang="en">
    <head>
        <meta charset="utf-8">
        <title>Error response</title>
    </head>
    <body>
        <h1>Error response</h1>
        <p>Error code: %(code)d</p>
        <p>Message: %(message)s.</p>
        <p>Error code explanation: %(code)s - %(explain)s.</p>
    </body>
</html>
"""
# (phrase, description) as http.HTTPStatus has them, for the statuses this module and the
# health server send; others come from HTTPStatus itself (building that enum is ~1.5% of a
# Felix start, so it is imported only then).
_PHRASES = {
    200: ("OK", "Request fulfilled, document follows"),
    204: ("No Content", "Request fulfilled, nothing follows"),
    400: ("Bad Request", "Bad request syntax or unsupported method"),
    404: ("Not Found", "Nothing matches the given URI"),
    414: ("Request-URI Too Long", "URI is too long"),
    431: (
        "Request Header Fields Too Large",
        "The server is unwilling to process the request because its header fields are too large",
    ),
    501: ("Not Implemented", "Server does not support this operation"),
    503: ("Service Unavailable", "The server cannot process the request due to a high load"),
    505: ("HTTP Version Not Supported", "Cannot fulfill request"),
}
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

Response = tuple[int, list[tuple[str, str]], bytes]
Respond = Callable[[str, str], Response]


def http_date(timestamp: float | None = None) -> str:
    """RFC 7231 date, as ``email.utils.formatdate(usegmt=True)`` writes it (no locale)."""
    t = time.gmtime(time.time() if timestamp is None else timestamp)
    return "%s, %02d %s %04d %02d:%02d:%02d GMT" % (  # noqa: UP031 (formatdate's layout)
        _DAYS[t.tm_wday], t.tm_mday, _MONTHS[t.tm_mon - 1], t.tm_year,
        t.tm_hour, t.tm_min, t.tm_sec,
    )  # fmt: skip


def phrases(status: int) -> tuple[str, str] | None:
    """``(phrase, description)`` of ``status`` as ``http.HTTPStatus`` gives it, else None."""
    if (known := _PHRASES.get(status)) is not None:
        return known
    from http import HTTPStatus

    try:
        member = HTTPStatus(status)
    except ValueError:
        return None
    return member.phrase, member.description


def _escape(text: str) -> str:
    """``html.escape(text, quote=False)``."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class _Exchange:
    """One request and its reply; a ``version`` of ``HTTP/0.9`` (the default, or as sent)
    gets the body only, as http.server writes it."""

    def __init__(self, sock: socket.socket, server_version: str) -> None:
        self.sock, self.server_version = sock, server_version
        self.version = "HTTP/0.9"
        self.command: str | None = None
        self.requestline = ""

    def head(self, status: int, message: str | None, headers: list[tuple[str, str]]) -> bytes:
        if self.version == "HTTP/0.9":
            return b""
        if message is None:
            message = (phrases(status) or ("",))[0]
        lines = [f"{PROTOCOL} {status} {message}\r\n", f"Server: {self.server_version}\r\n"]
        lines.append(f"Date: {http_date()}\r\n")
        lines.extend(f"{k}: {v}\r\n" for k, v in headers)
        lines.append("\r\n")
        return "".join(lines).encode("latin-1", "strict")

    def error(self, status: int, message: str | None = None, explain: str | None = None) -> None:
        short, long = phrases(status) or ("???", "???")
        message = short if message is None else message
        explain = long if explain is None else explain
        log.debug("http request: code %d, message %s", status, message)
        log.debug('http request: "%s" %s -', self.requestline, status)
        headers = [("Connection", "close")]
        body = b""
        if status >= 200 and status not in (204, 205, 304):
            text = ERROR_BODY % {
                "code": status,
                "message": _escape(message),
                "explain": _escape(explain),
            }
            body = text.encode("UTF-8", "replace")
            headers += [("Content-Type", ERROR_CONTENT_TYPE), ("Content-Length", str(len(body)))]
        self.send(self.head(status, message, headers), b"" if self.command == "HEAD" else body)

    def send(self, head: bytes, body: bytes) -> None:
        if head:
            self.sock.sendall(head)
        if body:
            self.sock.sendall(body)


def _version_error(version: str) -> tuple[int, str] | None:
    """The error ``BaseHTTPRequestHandler.parse_request`` sends for a request's version word."""
    try:
        if not version.startswith("HTTP/"):
            raise ValueError
        number = version.split("/", 1)[1]
        parts = number.split(".")
        if len(parts) != 2 or any(not p.isdigit() or len(p) > 10 for p in parts):
            raise ValueError
        major_minor = int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        return 400, f"Bad request version ({version!r})"
    if major_minor >= (2, 0):
        return 505, f"Invalid HTTP version ({number})"
    return None


def handle_connection(
    sock: socket.socket, respond: Respond, methods: Collection[str], server_version: str
) -> None:
    """Read one request from ``sock``, reply, and close the connection as http.server does."""
    rfile = sock.makefile("rb")
    ex = _Exchange(sock, server_version)
    try:
        _handle(ex, rfile, respond, methods)
    except OSError as exc:  # the client went away mid-request: nothing to answer
        log.debug("http request dropped: %s", exc)
    finally:
        rfile.close()
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
        sock.close()


def _handle(ex: _Exchange, rfile: BinaryIO, respond: Respond, methods: Collection[str]) -> None:
    raw = rfile.readline(MAX_LINE + 1)
    if len(raw) > MAX_LINE:
        ex.version, ex.command = "", ""
        ex.error(414)
        return
    if not raw:
        return
    ex.requestline = requestline = str(raw, "iso-8859-1").rstrip("\r\n")
    words = requestline.split()
    if not words:
        return
    if len(words) >= 3:
        if (err := _version_error(words[-1])) is not None:
            ex.error(*err)
            return
        ex.version = words[-1]
    if not 2 <= len(words) <= 3:
        ex.error(400, f"Bad request syntax ({requestline!r})")
        return
    command, path = words[:2]
    if len(words) == 2 and command != "GET":
        ex.error(400, f"Bad HTTP/0.9 request type ({command!r})")
        return
    ex.command = command
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    lines = 0
    while True:  # headers: read and counted as http.client.parse_headers does, not used
        line = rfile.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            explain = f"got more than {MAX_LINE} bytes when reading header line"
            ex.error(431, "Line too long", explain)
            return
        lines += 1
        if lines > MAX_HEADERS:
            ex.error(431, "Too many headers", f"got more than {MAX_HEADERS} headers")
            return
        if line in (b"\r\n", b"\n", b""):
            break
    if command not in methods:
        ex.error(501, f"Unsupported method ({command!r})")
        return
    status, headers, body = respond(command, path)
    log.debug('http request: "%s" %s -', requestline, status)
    ex.send(ex.head(status, None, headers), body)


class Listener:
    """A bound, listening socket and its accept loop (``serve_forever`` until ``shutdown``)."""

    def __init__(
        self,
        family: socket.AddressFamily,
        address: tuple[str, int],
        respond: Respond,
        methods: Collection[str],
        server_version: str,
    ) -> None:
        self._respond, self._methods, self._version = respond, frozenset(methods), server_version
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                # An empty host means every interface, IPv4 included, as Go's listener does.
                self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            self.socket.bind(address)
            self.socket.listen(LISTEN_BACKLOG)
        except BaseException:
            self.socket.close()
            raise
        self.server_address = self.socket.getsockname()
        self._wake_r, self._wake_w = os.pipe()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._done.set()  # a shutdown before serve_forever does not wait

    def serve_forever(self) -> None:
        self._done.clear()
        try:
            if self._stop.is_set():
                return
            poller = select.poll()
            poller.register(self.socket, select.POLLIN)
            poller.register(self._wake_r, select.POLLIN)
            while not self._stop.is_set():
                for fd, _ in poller.poll():
                    if fd == self._wake_r or self._stop.is_set():
                        return
                    self._accept()
        except (OSError, ValueError):
            if not self._stop.is_set():  # closed under us only when asked to stop
                raise
        finally:
            self._done.set()

    def _accept(self) -> None:
        try:
            conn, _ = self.socket.accept()
        except OSError as exc:  # the client reset before we got to it
            log.debug("http accept failed: %s", exc)
            return
        threading.Thread(
            target=handle_connection,
            args=(conn, self._respond, self._methods, self._version),
            name="http-request",
            daemon=True,
        ).start()

    def shutdown(self) -> None:
        """Stop ``serve_forever`` and wait until it has returned. The wake-up is written first:
        until then the loop cannot return, so its owner cannot have closed the pipe yet."""
        os.write(self._wake_w, b"x")
        self._stop.set()
        self._done.wait()

    def server_close(self) -> None:
        self.socket.close()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
