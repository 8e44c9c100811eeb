"""TLS over any ByteStream (a yamux stream has no socket), through ``ssl.MemoryBIO``.

The TLS engine (``ssl.SSLObject``) is fed ciphertext read from the inner stream and its
output is written to the inner stream. Writes are serialised by one lock so records never
interleave; reads flush too, since TLS 1.3 may answer a record (key update) while reading.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

from calico.guardian.streams import CHUNK, ByteStream


class TLSStream:
    def __init__(
        self,
        inner: ByteStream,
        obj: ssl.SSLObject,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
    ) -> None:
        self.inner = inner
        self._obj = obj
        self._in = incoming
        self._out = outgoing
        self._write_lock = asyncio.Lock()
        self._read_lock = asyncio.Lock()

    @classmethod
    async def wrap(
        cls,
        inner: ByteStream,
        context: ssl.SSLContext,
        *,
        server_side: bool,
        server_hostname: str | None = None,
        timeout: float = 10.0,
    ) -> TLSStream:
        """Run the handshake over ``inner``; ssl.SSLError or TimeoutError on failure."""
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = context.wrap_bio(
            incoming, outgoing, server_side=server_side, server_hostname=server_hostname
        )
        stream = cls(inner, obj, incoming, outgoing)
        await asyncio.wait_for(stream._handshake(), timeout)
        return stream

    @property
    def selected_alpn_protocol(self) -> str | None:
        return self._obj.selected_alpn_protocol()

    def getpeercert(self) -> dict | None:
        return self._obj.getpeercert()

    async def _handshake(self) -> None:
        while True:
            try:
                self._obj.do_handshake()
                await self._flush()
                return
            except ssl.SSLWantReadError:
                await self._flush()
                if not await self._fill():
                    raise ssl.SSLEOFError("connection closed during the TLS handshake") from None

    async def _flush(self) -> None:
        data = self._out.read()
        if data:
            await self.inner.write(data)

    async def _fill(self) -> bool:
        data = await self.inner.read(CHUNK)
        if not data:
            self._in.write_eof()
            return False
        self._in.write(data)
        return True

    async def read(self, max_bytes: int = CHUNK) -> bytes:
        async with self._read_lock:
            while True:
                try:
                    data = self._obj.read(max_bytes)
                except ssl.SSLWantReadError:
                    if self._out.pending:
                        async with self._write_lock:
                            await self._flush()
                    if not await self._fill():
                        # EOF without close_notify: treat as a clean end, as Go does for h2.
                        return b""
                    continue
                except ssl.SSLZeroReturnError:
                    return b""
                if self._out.pending:
                    async with self._write_lock:
                        await self._flush()
                return data

    async def write(self, data: bytes) -> None:
        async with self._write_lock:
            view = memoryview(data)
            while view:
                n = self._obj.write(view[:CHUNK])
                view = view[n:]
                await self._flush()

    async def close_write(self) -> None:
        async with self._write_lock:
            with contextlib.suppress(ssl.SSLError, ConnectionError):
                with contextlib.suppress(ssl.SSLWantReadError):
                    self._obj.unwrap()
                await self._flush()
            await self.inner.close_write()

    async def close(self) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            await self.close_write()
        await self.inner.close()

    def abort(self) -> None:
        self.inner.abort()
