"""One HTTP/2 connection over a ByteStream, driven by the ``h2`` state machine.

A read task feeds bytes to ``h2`` and routes stream events to per-stream queues; senders
respect the peer's flow-control windows. Received data is credited back only when the
consumer calls ``ack`` after forwarding it, so a slow receiver slows the sender end to end
instead of growing buffers. When the connection ends every open stream's queue gets
``CONNECTION_LOST``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import h2.config
import h2.connection
import h2.events
import h2.exceptions

from calico.guardian.streams import CHUNK, ByteStream

log = logging.getLogger(__name__)

Headers = list[tuple[bytes, bytes]]

CONNECTION_LOST = object()
_STREAM_EVENTS = (
    h2.events.RequestReceived,
    h2.events.ResponseReceived,
    h2.events.InformationalResponseReceived,
    h2.events.DataReceived,
    h2.events.TrailersReceived,
    h2.events.StreamEnded,
    h2.events.StreamReset,
)
# A large connection window so one slow stream does not starve the others; per-stream
# windows stay at the default and provide the back-pressure.
CONNECTION_WINDOW = 16 * 1024 * 1024


class H2Endpoint:
    def __init__(self, io: ByteStream, *, client_side: bool, name: str) -> None:
        config = h2.config.H2Configuration(client_side=client_side, header_encoding=None)
        self.conn = h2.connection.H2Connection(config)
        self.io = io
        self.name = name
        self.queues: dict[int, asyncio.Queue[object]] = {}
        self.on_request: Callable[[int, Headers, bool], None] | None = None
        self.closed = asyncio.Event()
        self._window = asyncio.Event()

    async def start(self) -> None:
        self.conn.initiate_connection()
        self.conn.increment_flow_control_window(CONNECTION_WINDOW - 65535)
        await self.flush()

    async def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            await self.io.write(data)

    async def run(self) -> None:
        """Read until the connection ends; never raises for a broken peer."""
        try:
            while True:
                data = await self.io.read(CHUNK)
                if not data:
                    break
                try:
                    events = self.conn.receive_data(data)
                except h2.exceptions.ProtocolError as exc:
                    log.warning("HTTP/2 protocol error on %s: %s", self.name, exc)
                    with contextlib.suppress(Exception):
                        await self.flush()
                    break
                for event in events:
                    self._dispatch(event)
                await self.flush()
                if events and isinstance(events[-1], h2.events.ConnectionTerminated):
                    break
        except (ConnectionError, OSError) as exc:
            log.debug("HTTP/2 connection %s ended: %s", self.name, exc)
        finally:
            self._lost()

    def _dispatch(self, event: h2.events.Event) -> None:
        if isinstance(event, _STREAM_EVENTS):
            sid = event.stream_id
            if isinstance(event, h2.events.RequestReceived):
                self.queues[sid] = asyncio.Queue()
                if self.on_request is not None:
                    self.on_request(sid, list(event.headers), event.stream_ended is not None)
                return
            queue = self.queues.get(sid)
            if queue is not None:
                queue.put_nowait(event)
            elif isinstance(event, h2.events.DataReceived):
                self.ack(sid, event.flow_controlled_length)
        elif isinstance(event, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            self._window.set()

    def _lost(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        self._window.set()
        for queue in self.queues.values():
            queue.put_nowait(CONNECTION_LOST)

    def ack(self, stream_id: int, length: int) -> None:
        if length:
            with contextlib.suppress(h2.exceptions.StreamClosedError, KeyError):
                self.conn.acknowledge_received_data(length, stream_id)

    async def send_data(
        self, stream_id: int, data: bytes, end_stream: bool = False, flush: bool = True
    ) -> None:
        """Queue ``data`` within the peer's windows; ``flush=False`` lets a caller coalesce
        several frames into one write (it must flush later)."""
        view = memoryview(data)
        while True:
            if self.closed.is_set():
                raise ConnectionResetError(f"HTTP/2 connection {self.name} closed")
            window = min(
                self.conn.local_flow_control_window(stream_id), self.conn.max_outbound_frame_size
            )
            if window <= 0 and view:
                await self.flush()
                self._window.clear()
                await self._window.wait()
                continue
            chunk, view = view[:window], view[window:]
            self.conn.send_data(stream_id, bytes(chunk), end_stream=end_stream and not view)
            if view or flush:
                await self.flush()
            if not view:
                return

    async def end_stream(self, stream_id: int) -> None:
        self.conn.end_stream(stream_id)
        await self.flush()

    async def reset(self, stream_id: int, code: int = 8) -> None:
        with contextlib.suppress(h2.exceptions.ProtocolError, KeyError):
            self.conn.reset_stream(stream_id, error_code=code)
            await self.flush()

    def reset_nowait(self, stream_id: int, code: int = 8) -> None:
        """Reset from a context that must not await (cleanup of a cancelled task)."""
        with contextlib.suppress(h2.exceptions.ProtocolError, KeyError):
            self.conn.reset_stream(stream_id, error_code=code)
            task = asyncio.ensure_future(self.flush())
            task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def forget(self, stream_id: int) -> None:
        self.queues.pop(stream_id, None)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close_connection()
            await self.flush()
        with contextlib.suppress(Exception):
            await self.io.close()
        self._lost()
