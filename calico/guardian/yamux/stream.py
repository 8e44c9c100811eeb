"""One yamux stream: a byte pipe with per-direction flow control.

Receive side: the peer may send at most ``recv_window`` bytes we have not credited back; a
read that drains the buffer credits the window back once the credit is at least half the
maximum (hashicorp's rule, so updates are not sent per read). Send side: writes wait for the
peer's window and are chunked to it. FIN half-closes (reads see EOF after buffered data);
RST or the session ending fails both directions.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from calico.guardian.yamux.frame import (
    FLAG_ACK,
    FLAG_FIN,
    FLAG_RST,
    FLAG_SYN,
    TYPE_DATA,
    TYPE_WINDOW_UPDATE,
)


class _Session(Protocol):
    """What a stream needs from its session (kept narrow: the session imports the stream)."""

    def send_frame_nowait(
        self, type_: int, flags: int, stream_id: int, length: int, payload: bytes = b""
    ) -> None: ...

    async def send_frame(
        self, type_: int, flags: int, stream_id: int, length: int, payload: bytes | memoryview = b""
    ) -> None: ...

    def forget(self, stream_id: int) -> None: ...


class StreamResetError(ConnectionResetError):
    """The peer reset the stream, or the session under it closed."""


class Stream:
    """Created by the session (``open_stream`` / ``accept``), never directly."""

    def __init__(
        self, session: _Session, stream_id: int, window: int, close_timeout: float = 300.0
    ) -> None:
        self._session = session
        self._close_timeout = close_timeout
        self.stream_id = stream_id
        self._max_window = window
        self._recv_window = window
        self._send_window = window
        self._buf = bytearray()
        self._readable = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._write_lock = asyncio.Lock()
        self._remote_closed = False
        self._local_closed = False
        self._read_closed = False
        self._failure = ""

    # -- called by the session's receive loop ---------------------------------------------------

    def recv_window(self) -> int:
        return self._recv_window

    def on_flags(self, flags: int) -> None:
        if flags & FLAG_RST:
            self._fail("stream reset by peer")
            return
        if flags & FLAG_FIN:
            self._remote_closed = True
            self._readable.set()
            self._maybe_forget()

    def on_data(self, payload: bytes) -> None:
        self._recv_window -= len(payload)
        if self._read_closed:
            # Nobody will read it: credit it straight back so the peer is never stuck.
            self._recv_window += len(payload)
            self._session.send_frame_nowait(TYPE_WINDOW_UPDATE, 0, self.stream_id, len(payload))
            return
        self._buf += payload
        self._readable.set()

    def on_window_update(self, delta: int) -> None:
        self._send_window += delta
        if self._send_window > 0:
            self._writable.set()

    def on_session_closed(self, reason: str) -> None:
        self._fail(reason)

    # -- the byte-stream interface ------------------------------------------------------------

    async def read(self, max_bytes: int = 65536) -> bytes:
        """Up to ``max_bytes`` buffered bytes; ``b""`` after the peer's FIN.

        Raises StreamResetError once the buffer is drained if the stream was reset or its
        session ended, so a truncated stream is never mistaken for a complete one.
        """
        while not self._buf:
            if self._failure:
                raise StreamResetError(self._failure)
            if self._remote_closed or self._read_closed:
                return b""
            self._readable.clear()
            await self._readable.wait()
        data = bytes(self._buf[:max_bytes])
        del self._buf[:max_bytes]
        self._credit_window()
        return data

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        async with self._write_lock:
            while view:
                self._check_writable()
                if self._send_window <= 0:
                    self._writable.clear()
                    await self._writable.wait()
                    continue
                n = min(self._send_window, len(view))
                self._send_window -= n
                await self._session.send_frame(TYPE_DATA, 0, self.stream_id, n, view[:n])
                view = view[n:]

    async def close_write(self) -> None:
        """Half-close: send FIN; the peer's reads see EOF after what was written."""
        async with self._write_lock:
            if self._local_closed or self._failure:
                return
            self._local_closed = True
            await self._session.send_frame(TYPE_WINDOW_UPDATE, FLAG_FIN, self.stream_id, 0)
        self._maybe_forget()

    async def close(self) -> None:
        """Stop reading and half-close; the stream is forgotten once the peer closes too.

        A peer that never closes its side is reset after the close timeout (hashicorp's
        StreamCloseTimeout), so an abandoned stream cannot live as long as the session.
        """
        self._read_closed = True
        self._buf.clear()
        await self.close_write()
        if not self.closed:
            loop = asyncio.get_running_loop()
            loop.call_later(self._close_timeout, self._on_close_timeout)

    def _on_close_timeout(self) -> None:
        if not self.closed:
            self.abort()

    def abort(self) -> None:
        """Reset the stream (RST) without waiting."""
        if self._failure:
            return
        self._session.send_frame_nowait(TYPE_WINDOW_UPDATE, FLAG_RST, self.stream_id, 0)
        self._fail("stream reset locally")

    @property
    def closed(self) -> bool:
        return bool(self._failure) or (self._local_closed and self._remote_closed)

    # -- internals ------------------------------------------------------------------------------

    def send_open(self) -> None:
        self._session.send_frame_nowait(TYPE_WINDOW_UPDATE, FLAG_SYN, self.stream_id, 0)

    def send_accept(self) -> None:
        self._session.send_frame_nowait(TYPE_WINDOW_UPDATE, FLAG_ACK, self.stream_id, 0)

    def _credit_window(self) -> None:
        if self._remote_closed or self._failure:
            return  # the peer sends nothing more: a window update would be for a dead stream
        delta = (self._max_window - len(self._buf)) - self._recv_window
        if delta < self._max_window // 2:
            return
        self._recv_window += delta
        self._session.send_frame_nowait(TYPE_WINDOW_UPDATE, 0, self.stream_id, delta)

    def _check_writable(self) -> None:
        if self._failure:
            raise StreamResetError(self._failure)
        if self._local_closed:
            raise BrokenPipeError("write on a yamux stream after close_write")

    def _fail(self, reason: str) -> None:
        if self._failure:
            return
        self._failure = reason
        self._readable.set()
        self._writable.set()
        self._session.forget(self.stream_id)

    def _maybe_forget(self) -> None:
        if self._local_closed and self._remote_closed:
            self._session.forget(self.stream_id)
