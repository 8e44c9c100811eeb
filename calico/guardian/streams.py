"""The one byte-stream shape every hop speaks: sockets, yamux streams and TLS over either.

``read`` returns ``b""`` at a clean end; ``close_write`` half-closes; ``abort`` drops the
connection at once. Keeping every hop to this shape lets one forwarder and one TLS layer serve
both tunnel directions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

log = logging.getLogger(__name__)

CHUNK = 256 * 1024


class ByteStream(Protocol):
    async def read(self, max_bytes: int = CHUNK) -> bytes: ...

    async def write(self, data: bytes) -> None: ...

    async def close_write(self) -> None: ...

    async def close(self) -> None: ...

    def abort(self) -> None: ...


class SocketStream:
    """An asyncio (reader, writer) pair as a ByteStream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def read(self, max_bytes: int = CHUNK) -> bytes:
        return await self.reader.read(max_bytes)

    async def write(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def close_write(self) -> None:
        if self.writer.can_write_eof():
            with contextlib.suppress(OSError):
                self.writer.write_eof()

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()

    def abort(self) -> None:
        transport = self.writer.transport
        transport.abort()


async def pump(src: ByteStream, dst: ByteStream) -> None:
    """Copy ``src`` to ``dst`` until EOF, then half-close ``dst``; errors propagate."""
    while True:
        data = await src.read(CHUNK)
        if not data:
            await dst.close_write()
            return
        await dst.write(data)


async def forward(a: ByteStream, b: ByteStream, what: str = "connection") -> None:
    """Pipe two streams both ways until both directions end.

    A failure in either direction (reset, tunnel gone) aborts both ends, so a truncated
    transfer shows as a reset to both parties rather than as a clean end.
    """
    tasks = [asyncio.create_task(pump(a, b)), asyncio.create_task(pump(b, a))]
    try:
        for fut in asyncio.as_completed(tasks):
            await fut
    except (ConnectionError, OSError, EOFError) as exc:
        log.debug("Forwarding %s ended with an error: %s", what, exc)
        for task in tasks:
            task.cancel()
        a.abort()
        b.abort()
        return
    finally:
        for task in tasks:
            task.cancel()
    await a.close()
    await b.close()
