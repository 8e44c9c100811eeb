"""Goldmane's gRPC services (Flows, FlowCollector, Statistics) over one engine and event loop.

Everything touching the engine runs on the server's event loop, so ingestion, rollover, queries
and stream registration are serialised without locks (upstream's single main loop). Bad
requests are INVALID_ARGUMENT with the engine's message; a stream beyond the limit is
RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc

from calico.goldmane.convert import KeyCache, flow_from_proto, flow_to_proto
from calico.goldmane.dedup import DedupCache
from calico.goldmane.filters import compile_filter
from calico.goldmane.queries import QueryError
from calico.goldmane.ring import BucketRing, FlowCollection, FlowResult
from calico.goldmane.streams import MAX_STREAMS, StreamManager, TooManyStreamsError
from calico.proto.goldmane import api_pb2 as pb
from calico.proto.goldmane import api_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

BEHIND_RETRY = 0.01  # a late rollover is retried this soon, until caught up
RECEIPT = pb.FlowReceipt()  # empty and immutable in use: one instance answers every update


def peer_host(peer: str) -> str:
    """``ipv4:10.0.0.1:5000`` -> ``10.0.0.1``; the port changes on every reconnect."""
    _, _, addr = peer.partition(":")
    host = addr.rpartition(":")[0] or addr
    return host.strip("[]")


class Goldmane:
    """The engine plus what surrounds it: clock, streams, dedup, rollover timer, counters."""

    def __init__(
        self,
        interval: int = 15,
        clock: Callable[[], float] = time.time,
        max_streams: int = MAX_STREAMS,
        num_buckets: int | None = None,
    ) -> None:
        self.clock = clock
        kwargs = {} if num_buckets is None else {"num_buckets": num_buckets}
        self.ring = BucketRing(int(clock()), interval, **kwargs)
        self.streams = StreamManager(max_streams)
        self.dedup = DedupCache()
        self.keys = KeyCache()
        self.received = 0
        self.dropped = 0
        self.duplicates = 0
        self.collectors = 0
        self.received_by_peer: dict[str, int] = {}
        self.rollovers = 0
        self.rollover_ms = 0.0  # total time spent rolling over (goldmane_* metrics)
        self.rollover_late_ms = 0.0  # total lateness of rollovers against their schedule
        self.backfills = 0
        self.backfill_ms = 0.0
        self.on_rollover: Callable[[], None] = lambda: None
        # The sink (the HTTP emitter): after each rollover it gets the collections that became
        # due, as long as ``sink_enabled()``; ``emit_shape`` = (buckets per collection, push after).
        self.sink: Callable[[list[FlowCollection]], None] | None = None
        self.sink_enabled: Callable[[], bool] = lambda: True
        self.emit_shape = (20, 2)

    def now(self) -> int:
        return int(self.clock())

    def receive(self, peer: str, flow: pb.Flow) -> None:
        self.received += 1
        self.received_by_peer[peer] = self.received_by_peer.get(peer, 0) + 1
        if self.dedup.is_duplicate(peer, flow.SerializeToString(deterministic=True), self.clock()):
            self.duplicates += 1
            return
        if not self.ring.add(flow_from_proto(flow, self.keys.get(flow.Key))):
            self.dropped += 1
            log.warning(
                "Dropping flow with start time %d outside [%d, %d)",
                flow.start_time,
                self.ring.oldest_start,
                self.ring.head_start + self.ring.interval,
            )

    def rollover(self) -> None:
        began = time.perf_counter()
        self.rollover_late_ms += max(0.0, self.clock() - self.ring.next_rollover) * 1000
        self.streams.publish(self.ring.rollover(collect=len(self.streams) > 0))
        self.emit()
        self.rollovers += 1
        self.rollover_ms += (time.perf_counter() - began) * 1000
        self.on_rollover()

    def emit(self) -> None:
        """Hand the collections that are now due to the sink (if any and enabled)."""
        if self.sink is None or not self.sink_enabled():
            return
        collections = self.ring.emit_collections(*self.emit_shape)
        if collections:
            self.sink(collections)

    async def run_rollovers(
        self, stop: asyncio.Event, sleep: Callable[[float], Awaitable[None]] | None = None
    ) -> None:
        """Roll over when each bucket ends, timed from the ring itself so it never drifts.

        ``sleep`` (tests) replaces the wait; by default the wait ends early when ``stop`` is set.
        """

        async def wait(delay: float) -> None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)

        sleep = sleep or wait
        while not stop.is_set():
            await sleep(max(self.ring.next_rollover - self.clock(), BEHIND_RETRY))
            if stop.is_set():
                return
            if self.clock() >= self.ring.next_rollover:
                self.rollover()


def _result(r: FlowResult) -> pb.FlowResult:
    return pb.FlowResult(id=r.id, flow=flow_to_proto(r.flow))


def _meta(page: object) -> pb.ListMetadata:
    return pb.ListMetadata(totalPages=page.total_pages, totalResults=page.total_results)  # type: ignore[attr-defined]


class FlowsService(pb_grpc.FlowsServicer):
    def __init__(self, gm: Goldmane) -> None:
        self.gm = gm

    async def List(
        self, request: pb.FlowListRequest, context: grpc.aio.ServicerContext
    ) -> pb.FlowListResult:
        try:
            res = self.gm.ring.list(request, self.gm.now())
        except QueryError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return pb.FlowListResult(meta=_meta(res.page), flows=[_result(r) for r in res.flows])

    async def Stream(
        self, request: pb.FlowStreamRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.FlowResult]:
        gm = self.gm
        if request.aggregation_interval not in (0, gm.ring.interval):
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"aggregation_interval must be {gm.ring.interval} for streams",
            )
        f = request.filter if request.HasField("filter") else None
        try:
            began = time.perf_counter()
            backfill = gm.ring.backfill(request.start_time_gte, f, gm.now())
            stream = gm.streams.open(compile_filter(f), backfill)
            gm.backfills += 1
            gm.backfill_ms += (time.perf_counter() - began) * 1000
        except QueryError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except TooManyStreamsError as exc:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        try:
            while True:
                yield _result(await stream.queue.get())
        finally:
            gm.streams.close(stream)

    async def FilterHints(
        self, request: pb.FilterHintsRequest, context: grpc.aio.ServicerContext
    ) -> pb.FilterHintsResult:
        try:
            values, page = self.gm.ring.filter_hints(request, self.gm.now())
        except QueryError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return pb.FilterHintsResult(
            meta=_meta(page), hints=[pb.FilterHint(value=v) for v in values]
        )


class FlowCollectorService(pb_grpc.FlowCollectorServicer):
    def __init__(self, gm: Goldmane) -> None:
        self.gm = gm

    async def Connect(
        self, request_iterator: AsyncIterator[pb.FlowUpdate], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.FlowReceipt]:
        peer = peer_host(context.peer())
        self.gm.collectors += 1
        log.info("Flow collector connected from %s", peer)
        try:
            async for update in request_iterator:
                self.gm.receive(peer, update.flow)
                yield RECEIPT
        finally:
            self.gm.collectors -= 1
            log.info("Flow collector %s disconnected", peer)


class StatisticsService(pb_grpc.StatisticsServicer):
    def __init__(self, gm: Goldmane) -> None:
        self.gm = gm

    async def List(
        self, request: pb.StatisticsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.StatisticsResult]:
        try:
            results = self.gm.ring.statistics(request, self.gm.now())
        except QueryError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        for r in results:
            yield r


def add_services(server: grpc.aio.Server, gm: Goldmane) -> None:
    pb_grpc.add_FlowsServicer_to_server(FlowsService(gm), server)
    pb_grpc.add_FlowCollectorServicer_to_server(FlowCollectorService(gm), server)
    pb_grpc.add_StatisticsServicer_to_server(StatisticsService(gm), server)
