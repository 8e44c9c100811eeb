"""One shared HTTP/2 connection per target, (re)made on demand.

Requests from every tunnelled stream to the same target multiplex over one TLS connection
(ALPN must select ``h2``: gRPC needs trailers and upstream forces HTTP/2). A dead connection
is replaced by the next request.
"""

from __future__ import annotations

import asyncio
import logging
import ssl

from calico.guardian.h2endpoint import H2Endpoint, Headers
from calico.guardian.streams import SocketStream
from calico.guardian.targets import Target

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 10.0


class UpstreamError(ConnectionError):
    """The target could not be reached over HTTP/2."""


class Upstream:
    def __init__(self, target: Target) -> None:
        self.target = target
        self._ep: H2Endpoint | None = None
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    async def _endpoint(self) -> H2Endpoint:
        async with self._lock:
            ep = self._ep
            if (
                ep is not None
                and not ep.closed.is_set()
                and ep.conn.open_outbound_streams < (ep.conn.remote_settings.max_concurrent_streams)
            ):
                return ep
            t = self.target
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(t.host, t.port, ssl=t.tls, server_hostname=t.host),
                    CONNECT_TIMEOUT,
                )
            except (OSError, ssl.SSLError, TimeoutError) as exc:
                raise UpstreamError(f"dial {t.dest}: {exc or type(exc).__name__}") from exc
            io = SocketStream(reader, writer)
            alpn = writer.get_extra_info("ssl_object").selected_alpn_protocol()
            if alpn != "h2":
                writer.close()
                raise UpstreamError(f"{t.dest} did not negotiate HTTP/2 (ALPN {alpn!r})")
            ep = H2Endpoint(io, client_side=True, name=f"upstream {t.dest}")
            await ep.start()
            task = asyncio.create_task(ep.run())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            self._ep = ep
            return ep

    async def open(self, headers: Headers, end_stream: bool) -> tuple[H2Endpoint, int]:
        ep = await self._endpoint()
        sid = ep.conn.get_next_available_stream_id()
        ep.queues[sid] = asyncio.Queue()
        ep.conn.send_headers(sid, headers, end_stream=end_stream)
        await ep.flush()
        return ep, sid

    async def close(self) -> None:
        if self._ep is not None:
            await self._ep.close()
        for task in list(self._tasks):
            task.cancel()
