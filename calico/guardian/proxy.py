"""The reverse proxy behind each stream the management side opens (HTTP/2 over TLS).

Per request: match a target (404 ``404 page not found`` if none), add the target's bearer token
(500 if it cannot be read), ``X-Forwarded-Host`` and ``X-Forwarded-For``, send it upstream and
relay the answer: headers, every DATA frame as it arrives (upstream's FlushInterval -1, so
gRPC server streams are not delayed), trailers, resets. Every response carries upstream's
``Strict-Transport-Security`` header. An unreachable target is a 502.
"""

from __future__ import annotations

import asyncio
import logging

import h2.events
import h2.exceptions

from calico.guardian.h2endpoint import CONNECTION_LOST, H2Endpoint, Headers
from calico.guardian.streams import ByteStream
from calico.guardian.targets import Target, match
from calico.guardian.upstream import Upstream, UpstreamError

log = logging.getLogger(__name__)

HSTS = (b"strict-transport-security", b"max-age=31536000; includeSubDomains")
_HOP_BY_HOP = {
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"proxy-authenticate",
    b"proxy-authorization",
    b"transfer-encoding",
    b"upgrade",
    b"trailer",
}
_CANCEL = 8  # RST_STREAM CANCEL
_ABANDONED = object()  # queued for the response relay when the downstream stream is gone


def _join_path(base: str, path: bytes) -> bytes:
    if not base:
        return path
    b = base.encode()
    if path.startswith(b"/"):
        return b.rstrip(b"/") + path
    return b + b"/" + path


def upstream_headers(
    headers: Headers, target: Target, authorization: bytes | None, client_ip: str
) -> Headers:
    pseudo: dict[bytes, bytes] = {}
    regular: Headers = []
    forwarded_for = b""
    for name, value in headers:
        if name.startswith(b":"):
            pseudo[name] = value
        elif name in _HOP_BY_HOP or (name == b"te" and value.lower() != b"trailers"):
            continue
        elif name == b"x-forwarded-for":
            forwarded_for = value
        elif name in (b"authorization", b"x-forwarded-host") and (
            name != b"authorization" or authorization is not None
        ):
            continue
        else:
            regular.append((name, value))
    authority = pseudo.get(b":authority", target.host.encode())
    out: Headers = [
        (b":method", pseudo.get(b":method", b"GET")),
        (b":scheme", b"https"),
        (b":authority", authority),
        (b":path", _join_path(target.base_path, pseudo.get(b":path", b"/"))),
    ]
    out += regular
    if authorization is not None:
        out.append((b"authorization", authorization))
    out.append((b"x-forwarded-host", authority))
    if client_ip:
        ip = client_ip.encode()
        out.append((b"x-forwarded-for", forwarded_for + b", " + ip if forwarded_for else ip))
    return out


def _response_headers(headers: Headers) -> Headers:
    out = [(n, v) for n, v in headers if n not in _HOP_BY_HOP]
    out.append(HSTS)
    return out


class ProxyConnection:
    """Serves one downstream HTTP/2 connection."""

    def __init__(
        self,
        io: ByteStream,
        targets: list[Target],
        upstreams: dict[str, Upstream],
        client_ip: str = "",
    ) -> None:
        self.ep = H2Endpoint(io, client_side=False, name="tunnelled connection")
        self.targets = targets
        self.upstreams = upstreams
        self.client_ip = client_ip
        self._tasks: set[asyncio.Task[None]] = set()

    async def serve(self) -> None:
        self.ep.on_request = self._spawn
        await self.ep.start()
        try:
            await self.ep.run()
        finally:
            for task in list(self._tasks):
                task.cancel()
            await self.ep.close()

    def _spawn(self, sid: int, headers: Headers, ended: bool) -> None:
        task = asyncio.create_task(self._handle(sid, headers, ended))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _simple(self, sid: int, status: int, body: bytes) -> None:
        headers = [(b":status", str(status).encode()), HSTS]
        if body:
            headers += [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"x-content-type-options", b"nosniff"),
                (b"content-length", str(len(body)).encode()),
            ]
        self.ep.conn.send_headers(sid, headers, end_stream=not body)
        if body:
            await self.ep.send_data(sid, body, end_stream=True)
        else:
            await self.ep.flush()

    async def _handle(self, sid: int, headers: Headers, ended: bool) -> None:
        try:
            await self._proxy(sid, headers, ended)
        except (ConnectionError, OSError, h2.exceptions.ProtocolError) as exc:
            log.debug("Proxying stream %d ended: %s", sid, exc)
            await self.ep.reset(sid, _CANCEL)
        except Exception as exc:  # a bug must cost one request, not the connection
            log.error("Proxying stream %d failed: %r", sid, exc)
            await self.ep.reset(sid, 2)  # INTERNAL_ERROR
        finally:
            self.ep.forget(sid)

    async def _proxy(self, sid: int, headers: Headers, ended: bool) -> None:
        path = dict(headers).get(b":path", b"/").decode("latin-1")
        target = match(self.targets, path)
        if target is None:
            log.debug("No target for %s", path)
            await self._simple(sid, 404, b"404 page not found\n")
            return
        try:
            authorization = target.authorization()
        except OSError as exc:
            log.error("Loading token failed %s", exc)
            await self._simple(sid, 500, b"Internal Server Error, token read failure\n")
            return
        upstream = self.upstreams[target.path]
        try:
            up, up_sid = await upstream.open(
                upstream_headers(headers, target, authorization, self.client_ip), ended
            )
        except (UpstreamError, h2.exceptions.ProtocolError) as exc:
            log.warning("http: proxy error: %s", exc)
            await self._simple(sid, 502, b"")
            return
        log.debug("Received request %s will proxy to %s", path, target.dest)
        request = asyncio.create_task(self._request_body(sid, up, up_sid, ended))
        finished = False
        try:
            await self._response(sid, up, up_sid)
            finished = True
        finally:
            request.cancel()
            if not finished:
                # The tunnel side went away (or failed) mid-response: cancel upstream too.
                up.reset_nowait(up_sid, _CANCEL)
            up.forget(up_sid)

    async def _request_body(self, sid: int, up: H2Endpoint, up_sid: int, ended: bool) -> None:
        queue = self.ep.queues[sid]
        while True:
            event = await queue.get()
            if event is CONNECTION_LOST or isinstance(event, h2.events.StreamReset):
                # The management side gave up: cancel upstream and stop relaying its answer.
                await up.reset(up_sid, _CANCEL)
                if (q := up.queues.get(up_sid)) is not None:
                    q.put_nowait(_ABANDONED)
                return
            if isinstance(event, h2.events.DataReceived):
                await up.send_data(up_sid, event.data)
                self.ep.ack(sid, event.flow_controlled_length)
                await self.ep.flush()
            elif isinstance(event, h2.events.StreamEnded):
                if not ended:
                    await up.end_stream(up_sid)
                    ended = True
            elif isinstance(event, h2.events.TrailersReceived):
                up.conn.send_headers(up_sid, list(event.headers), end_stream=True)
                await up.flush()
                ended = True

    async def _response(self, sid: int, up: H2Endpoint, up_sid: int) -> None:
        queue = up.queues[up_sid]
        started = False
        while True:
            event = await queue.get()
            if event is _ABANDONED:
                return
            if event is CONNECTION_LOST:
                if not started:
                    log.warning("http: proxy error: upstream %s closed", up.name)
                    await self._simple(sid, 502, b"")
                else:
                    await self.ep.reset(sid, _CANCEL)
                return
            if isinstance(event, h2.events.StreamReset):
                await self.ep.reset(sid, event.error_code or _CANCEL)
                return
            if isinstance(event, h2.events.InformationalResponseReceived):
                continue
            # Events that arrived together (headers, data, end) leave in one write.
            more = not queue.empty()
            if isinstance(event, h2.events.ResponseReceived):
                self.ep.conn.send_headers(sid, _response_headers(list(event.headers)))
                if not more:
                    await self.ep.flush()
                started = True
            elif isinstance(event, h2.events.DataReceived):
                await self.ep.send_data(sid, event.data, flush=not more)
                up.ack(up_sid, event.flow_controlled_length)
                if not more:
                    await up.flush()
            elif isinstance(event, h2.events.TrailersReceived):
                self.ep.conn.send_headers(sid, list(event.headers), end_stream=True)
                await self.ep.flush()
                return
            elif isinstance(event, h2.events.StreamEnded):
                await self.ep.end_stream(sid)
                await up.flush()
                return
