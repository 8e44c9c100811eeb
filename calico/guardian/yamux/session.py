"""A yamux session over one ordered byte connection (here: the mTLS tunnel).

One receive task reads frames and dispatches them; writers put whole frames on the transport
without awaiting in between, so frames never interleave. The client side opens odd stream IDs,
the server even ones. Anything hashicorp treats as fatal (bad version or type, a duplicate SYN,
data beyond the granted window, a Go Away with an error code, a keepalive ping unanswered for
``connection_write_timeout``) ends the session with one logged reason; its streams then fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from dataclasses import dataclass

from calico.guardian.yamux.frame import (
    FLAG_ACK,
    FLAG_RST,
    FLAG_SYN,
    GO_AWAY_INTERNAL_ERROR,
    GO_AWAY_NORMAL,
    GO_AWAY_PROTOCOL_ERROR,
    HEADER_SIZE,
    INITIAL_WINDOW,
    TYPE_GO_AWAY,
    TYPE_PING,
    TYPE_WINDOW_UPDATE,
    FrameError,
    decode_header,
    encode_header,
)
from calico.guardian.yamux.stream import Stream

log = logging.getLogger(__name__)


class SessionClosedError(ConnectionError):
    """The session has ended (or the peer said Go Away and no new stream may be opened)."""


@dataclass(frozen=True)
class SessionConfig:
    """hashicorp's ``yamux.Config`` fields that matter on the wire."""

    accept_backlog: int = 256
    enable_keepalive: bool = True
    keepalive_interval: float = 30.0
    connection_write_timeout: float = 10.0
    stream_close_timeout: float = 300.0
    max_stream_window: int = INITIAL_WINDOW


class Session:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        client: bool,
        config: SessionConfig | None = None,
        name: str = "yamux",
    ) -> None:
        self.config = config or SessionConfig()
        self.name = name
        self._reader = reader
        self._writer = writer
        self._next_id = 1 if client else 2
        self._streams: dict[int, Stream] = {}
        self._accept: asyncio.Queue[Stream] = asyncio.Queue(self.config.accept_backlog)
        self._pings: dict[int, asyncio.Future[None]] = {}
        self._ping_ids = itertools.count(1)
        self._remote_go_away = False
        self._local_go_away = False
        self._closed = asyncio.Event()
        self.close_reason = ""
        self.pings_received = 0
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._recv_loop(), name=f"{self.name}-recv"))
        if self.config.enable_keepalive:
            self._tasks.append(asyncio.create_task(self._keepalive(), name=f"{self.name}-ping"))

    # -- public API -----------------------------------------------------------------------------

    @property
    def peer_host(self) -> str:
        """The remote address of the connection under the session (X-Forwarded-For)."""
        peer = self._writer.get_extra_info("peername")
        return str(peer[0]) if isinstance(peer, tuple) and peer else ""

    @property
    def is_closed(self) -> bool:
        return self._closed.is_set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    def open_stream(self) -> Stream:
        if self.is_closed:
            raise SessionClosedError(f"session closed: {self.close_reason}")
        if self._remote_go_away:
            raise SessionClosedError("remote end is not accepting connections (go away)")
        stream_id = self._next_id
        self._next_id += 2
        stream = Stream(
            self, stream_id, self.config.max_stream_window, self.config.stream_close_timeout
        )
        self._streams[stream_id] = stream
        stream.send_open()
        return stream

    async def accept(self) -> Stream:
        """The next stream the peer opened; SessionClosedError once the session ends."""
        if self.is_closed and self._accept.empty():
            raise SessionClosedError(f"session closed: {self.close_reason}")
        getter = asyncio.ensure_future(self._accept.get())
        closed = asyncio.ensure_future(self._closed.wait())
        try:
            await asyncio.wait({getter, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
        if getter.done():
            return getter.result()
        getter.cancel()
        raise SessionClosedError(f"session closed: {self.close_reason}")

    async def ping(self) -> float:
        """Round-trip time of one ping; TimeoutError after ``connection_write_timeout``."""
        ping_id = next(self._ping_ids) & 0xFFFFFFFF
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pings[ping_id] = fut
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            await self.send_frame(TYPE_PING, FLAG_SYN, 0, ping_id)
            await asyncio.wait_for(fut, self.config.connection_write_timeout)
        finally:
            self._pings.pop(ping_id, None)
        return loop.time() - start

    async def go_away(self) -> None:
        """Tell the peer not to open new streams (existing ones carry on)."""
        self._local_go_away = True
        await self.send_frame(TYPE_GO_AWAY, 0, 0, GO_AWAY_NORMAL)

    async def close(self, reason: str = "closed locally") -> None:
        if not self.is_closed:
            with contextlib.suppress(Exception):
                self.send_frame_nowait(TYPE_GO_AWAY, 0, 0, GO_AWAY_NORMAL)
        self._shutdown(reason)
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()
        for task in self._tasks:
            if task is not current:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    # -- frame output (used by streams) -------------------------------------------------------

    def send_frame_nowait(
        self, type_: int, flags: int, stream_id: int, length: int, payload: bytes = b""
    ) -> None:
        if self._writer.is_closing():
            return
        self._writer.write(encode_header(type_, flags, stream_id, length))
        if payload:
            self._writer.write(payload)

    async def send_frame(
        self,
        type_: int,
        flags: int,
        stream_id: int,
        length: int,
        payload: bytes | memoryview = b"",
    ) -> None:
        if self.is_closed:
            raise SessionClosedError(f"session closed: {self.close_reason}")
        self._writer.write(encode_header(type_, flags, stream_id, length))
        if payload:
            self._writer.write(payload)
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            self._shutdown(f"write failed: {exc}")
            raise SessionClosedError(f"session closed: {self.close_reason}") from exc

    def forget(self, stream_id: int) -> None:
        self._streams.pop(stream_id, None)

    @property
    def num_streams(self) -> int:
        return len(self._streams)

    # -- receive side ---------------------------------------------------------------------------

    async def _recv_loop(self) -> None:
        try:
            while not self.is_closed:
                raw = await self._reader.readexactly(HEADER_SIZE)
                await self._dispatch(raw)
        except asyncio.IncompleteReadError:
            self._shutdown("connection closed by peer")
        except FrameError as exc:
            log.error("yamux: %s; closing session %s", exc, self.name)
            self._protocol_error(str(exc))
        except (ConnectionError, OSError) as exc:
            self._shutdown(f"read failed: {exc}")
        except asyncio.CancelledError:
            raise

    async def _dispatch(self, raw: bytes) -> None:
        hdr = decode_header(raw)
        if hdr.type == TYPE_PING:
            self._on_ping(hdr.flags, hdr.length)
            return
        if hdr.type == TYPE_GO_AWAY:
            self._on_go_away(hdr.length)
            return
        stream = self._streams.get(hdr.stream_id)
        if hdr.flags & FLAG_SYN:
            stream = self._incoming(hdr.stream_id)
        if hdr.type == TYPE_WINDOW_UPDATE:
            if stream is not None:
                stream.on_flags(hdr.flags)
                stream.on_window_update(hdr.length)
            return
        # TYPE_DATA
        payload = await self._reader.readexactly(hdr.length) if hdr.length else b""
        if stream is None:
            log.debug("yamux: discarding %d bytes for unknown stream %d", hdr.length, hdr.stream_id)
            return
        if hdr.length > stream.recv_window():
            raise FrameError(
                f"receive window exceeded on stream {hdr.stream_id} "
                f"({hdr.length} bytes > window {stream.recv_window()})"
            )
        if payload:
            stream.on_data(payload)
        stream.on_flags(hdr.flags)

    def _incoming(self, stream_id: int) -> Stream | None:
        if stream_id in self._streams:
            raise FrameError(f"duplicate stream declared: {stream_id}")
        if stream_id == 0:
            raise FrameError("SYN on stream 0")
        stream = Stream(
            self, stream_id, self.config.max_stream_window, self.config.stream_close_timeout
        )
        if self._local_go_away:
            self.send_frame_nowait(TYPE_WINDOW_UPDATE, FLAG_RST, stream_id, 0)
            return None
        try:
            self._accept.put_nowait(stream)
        except asyncio.QueueFull:
            log.warning("yamux: backlog exceeded, resetting stream %d", stream_id)
            self.send_frame_nowait(TYPE_WINDOW_UPDATE, FLAG_RST, stream_id, 0)
            return None
        self._streams[stream_id] = stream
        stream.send_accept()
        return stream

    def _on_ping(self, flags: int, value: int) -> None:
        if flags & FLAG_SYN:
            self.pings_received += 1
            self.send_frame_nowait(TYPE_PING, FLAG_ACK, 0, value)
            return
        fut = self._pings.get(value)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _on_go_away(self, code: int) -> None:
        if code == GO_AWAY_NORMAL:
            self._remote_go_away = True
            return
        if code == GO_AWAY_PROTOCOL_ERROR:
            reason = "received protocol error go away"
        elif code == GO_AWAY_INTERNAL_ERROR:
            reason = "received internal error go away"
        else:
            reason = f"received unexpected go away code {code}"
        log.error("yamux: %s; closing session %s", reason, self.name)
        self._shutdown(reason)

    def _protocol_error(self, reason: str) -> None:
        with contextlib.suppress(Exception):
            self.send_frame_nowait(TYPE_GO_AWAY, 0, 0, GO_AWAY_PROTOCOL_ERROR)
        self._shutdown(reason)

    async def _keepalive(self) -> None:
        while not self.is_closed:
            await asyncio.sleep(self.config.keepalive_interval)
            try:
                await self.ping()
            except TimeoutError:
                log.error(
                    "yamux: keepalive failed: no ping response; closing session %s", self.name
                )
                self._shutdown("keepalive timeout")
                return
            except SessionClosedError:
                return

    def _shutdown(self, reason: str) -> None:
        if self.is_closed:
            return
        self.close_reason = reason
        self._closed.set()
        log.info("yamux session %s closed: %s", self.name, reason)
        for stream in list(self._streams.values()):
            stream.on_session_closed(f"session closed: {reason}")
        self._streams.clear()
        for fut in self._pings.values():
            if not fut.done():
                fut.set_exception(SessionClosedError(reason))
        with contextlib.suppress(Exception):
            self._writer.close()
