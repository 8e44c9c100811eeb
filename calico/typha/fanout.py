"""The fan-out fast path: caught-up connections are written by one loop callback per crumb.

Profiling 1,000 clients (design/typha.md "Fan-out") showed each delta costing every client a
task wake-up, a coroutine step and five metric calls (~130 µs of Python each) besides the
``send``. So a connection with nothing buffered and no newer crumb *parks* here instead of
awaiting the cache; when the cache mints crumbs, ``deliver`` builds each distinct payload once
(per start crumb, compression and last sent status — normally one for everybody), writes it to
every parked transport in one pass and updates the metrics once per group. A connection whose
transport kept bytes back (a slow reader) or whose write failed is handed back to its own task,
which drains with the write timeout and catches up on the slow path.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from calico.syncer.api import SyncStatus
from calico.typha.metrics import TyphaMetrics, observe_many
from calico.typha.snapcache import Breadcrumb, SnapshotCache

# (first unsent crumb, last status sent, compressed, max KVs) -> ``server.Frames``
FrameBuilder = Callable[[Breadcrumb, SyncStatus, bool, int], Any]


@dataclass(eq=False)
class Parked:
    """One waiting connection: where it is and how to resume its task."""

    transport: asyncio.WriteTransport
    crumb: Breadcrumb
    status: SyncStatus
    compressed: bool
    since: float
    future: asyncio.Future[tuple[Breadcrumb, SyncStatus]] = field(repr=False)


class Fanout:
    def __init__(
        self,
        name: str,
        cache: SnapshotCache,
        metrics: TyphaMetrics,
        build: FrameBuilder,
        max_kvs: int,
    ) -> None:
        self.name, self.cache, self.build, self.max_kvs = name, cache, build, max_kvs
        self.parked: dict[int, Parked] = {}
        self._block = metrics.breadcrumb_block.labels(name)
        self._next_latency = metrics.next_breadcrumb_latency_secs.labels(name)
        self._kvs_per_msg = metrics.kvs_per_msg.labels(name)
        self._latency = metrics.client_latency_secs.labels(name)
        self._write_latency = metrics.client_write_latency_secs.labels(name)
        cache.add_listener(self.deliver)

    async def park(
        self,
        conn_id: int,
        transport: asyncio.WriteTransport,
        crumb: Breadcrumb,
        status: SyncStatus,
        compressed: bool,
    ) -> tuple[Breadcrumb, SyncStatus]:
        """Wait here until a delivery left bytes buffered; returns the client's new position."""
        future: asyncio.Future[tuple[Breadcrumb, SyncStatus]] = (
            asyncio.get_running_loop().create_future()
        )
        self.parked[conn_id] = Parked(
            transport, crumb, status, compressed, time.monotonic(), future
        )
        try:
            if crumb.next is not None:  # raced with a new crumb: deliver now
                self.deliver()
            return await future
        finally:
            self.parked.pop(conn_id, None)

    def deliver(self) -> None:
        """Write every parked connection's next frames (on the loop, after the cache's wake)."""
        if not self.parked:
            return
        start = time.monotonic()
        built: dict[tuple[int, bool, SyncStatus], Any] = {}
        groups: dict[tuple[int, bool, SyncStatus], list[Parked]] = {}
        for p in list(self.parked.values()):
            if p.future.done() or p.crumb.next is None:
                continue
            k = (p.crumb.seq, p.compressed, p.status)
            result = built.get(k)
            if result is None:
                result = built[k] = self.build(p.crumb.next, p.status, p.compressed, self.max_kvs)
            last, status = result.last, result.status
            if result.data:
                try:
                    p.transport.write(result.data)
                except Exception as exc:  # the connection's own task reports it
                    p.future.set_exception(exc)
                    continue
            p.crumb, p.status = last, status
            groups.setdefault(k, []).append(p)
            if p.transport.get_write_buffer_size() or p.transport.is_closing():
                p.future.set_result((last, status))  # back to its task: drain, catch up
        now_wall, now = time.time(), time.monotonic()
        sent = 0
        for k, members in groups.items():
            out = built[k]
            n = len(members)
            self._block.inc(n)
            observe_many(self._next_latency, sum(now - p.since for p in members) / n, n)
            for p in members:
                p.since = now
            if out.data:
                sent += n
                for count in out.kv_counts:
                    observe_many(self._kvs_per_msg, count, n)
                observe_many(self._latency, max(0.0, now_wall - out.last.timestamp), n)
        if sent:
            observe_many(self._write_latency, (now - start) / sent, sent)
