"""Flow streams: backfill, then one bucket per rollover, for at most ``MAX_STREAMS`` clients.

Registration and backfill happen in one step on the event loop, so no rollover can fall in
between: a stream sees every bucket exactly once, old ones from backfill, new ones as they
complete.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from calico.goldmane.ring import FlowResult
from calico.goldmane.types import FlowKey

MAX_STREAMS = 100


class TooManyStreamsError(RuntimeError):
    pass


class FlowStream:
    def __init__(self, pred: Callable[[FlowKey], bool]) -> None:
        self.pred = pred
        self.queue: asyncio.Queue[FlowResult] = asyncio.Queue()


class StreamManager:
    def __init__(self, max_streams: int = MAX_STREAMS) -> None:
        self.max_streams = max_streams
        self._streams: set[FlowStream] = set()

    def __len__(self) -> int:
        return len(self._streams)

    def open(self, pred: Callable[[FlowKey], bool], backfill: Iterable[FlowResult]) -> FlowStream:
        if len(self._streams) >= self.max_streams:
            raise TooManyStreamsError(f"too many streams (maximum {self.max_streams})")
        stream = FlowStream(pred)
        for r in backfill:
            stream.queue.put_nowait(r)
        self._streams.add(stream)
        return stream

    def close(self, stream: FlowStream) -> None:
        self._streams.discard(stream)

    def publish(self, results: list[FlowResult]) -> None:
        for stream in self._streams:
            for r in results:
                if stream.pred(r.flow.key):
                    stream.queue.put_nowait(r)
