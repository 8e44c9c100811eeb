"""The aggregation engine: a ring of time buckets and a per-key time series (design/goldmane.md).

The ring holds ``num_buckets`` buckets of ``interval`` seconds. The head bucket is one interval
in the future (flows from nodes whose clock runs ahead still land), the bucket before it is
filling ("now"), and the one before that is the next to go to streams. A flow lands in the
bucket containing its start time; within a bucket, flows of one key are summed and their labels
intersected. Each key also keeps its buckets (the "diachronic" view), so a query aggregates a
key over a time range without scanning keys that have no data there, and a key whose last
bucket is recycled is forgotten.

Not thread-safe: the daemon drives it from one event loop. Time is passed in, never read.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from calico.goldmane.filters import PolicyPredicate, compile_filter, match_all
from calico.goldmane.hints import hint_values
from calico.goldmane.queries import (
    Page,
    QueryError,
    TimeRange,
    check_page,
    paginate,
    time_range,
)
from calico.goldmane.stats import StatisticsBuilder
from calico.goldmane.types import Flow, FlowKey
from calico.proto.goldmane import api_pb2 as pb

NUM_BUCKETS = 242
INTERVAL = 15

# A page this many times smaller than the matches is picked with a heap, not a full sort.
PARTIAL_SORT_RATIO = 8

# Sort orders with an index upstream; the others are rejected as upstream rejects them.
SORT_FIELDS = {
    pb.DestName: "dest_name",
    pb.DestNamespace: "dest_namespace",
    pb.SourceName: "source_name",
    pb.SourceNamespace: "source_namespace",
}

ID_BITS = 40
ID_MASK = (1 << ID_BITS) - 1


@dataclass(slots=True)
class _Bucket:
    start: int
    end: int
    flows: dict[FlowKey, Flow] = field(default_factory=dict)
    pushed: bool = False  # part of a flow collection already handed to the sink


@dataclass(slots=True)
class _Series:
    id: int
    windows: dict[int, Flow] = field(default_factory=dict)  # bucket start -> that bucket's flow


@dataclass(frozen=True, slots=True)
class FlowResult:
    id: int
    flow: Flow


@dataclass(frozen=True, slots=True)
class FlowCollection:
    """Flows aggregated over [start, end) for the sink (the HTTP emitter), ordered by id."""

    start: int
    end: int
    flows: list[Flow]


@dataclass(frozen=True, slots=True)
class ListResult:
    flows: list[FlowResult]
    page: Page


class BucketRing:
    def __init__(self, now: int, interval: int = INTERVAL, num_buckets: int = NUM_BUCKETS) -> None:
        if interval <= 0 or num_buckets < 3:
            raise ValueError("need a positive interval and at least 3 buckets")
        self.interval = interval
        aligned = now - now % interval
        head_start = aligned + interval
        # Slot i holds the bucket i intervals after the oldest; the head is the last slot.
        self._buckets = [
            _Bucket(head_start - (num_buckets - 1 - i) * interval, 0) for i in range(num_buckets)
        ]
        for b in self._buckets:
            b.end = b.start + interval
        self._head = num_buckets - 1
        self._series: dict[FlowKey, _Series] = {}
        self._by_id: dict[int, FlowKey] = {}
        self._next_id = 0

    # -- geometry -------------------------------------------------------------------------------

    @property
    def num_buckets(self) -> int:
        return len(self._buckets)

    def _slot(self, back: int) -> _Bucket:
        return self._buckets[(self._head - back) % len(self._buckets)]

    @property
    def head_start(self) -> int:
        return self._slot(0).start

    @property
    def oldest_start(self) -> int:
        return self._slot(len(self._buckets) - 1).start

    @property
    def next_rollover(self) -> int:
        """When the filling bucket ends: the time the next rollover is due."""
        return self._slot(1).end

    @property
    def streaming_start(self) -> int:
        """Start of the bucket the next rollover sends to streams (backfill stops before it)."""
        return self._slot(2).start

    def _bucket_for(self, t: int) -> _Bucket | None:
        back = (self.head_start - (t - t % self.interval)) // self.interval
        if 0 <= back < len(self._buckets):
            return self._slot(back)
        return None

    def _buckets_oldest_first(self, tr: TimeRange) -> Iterator[_Bucket]:
        n = len(self._buckets)
        for back in range(n - 1, -1, -1):
            b = self._slot(back)
            if tr.contains(b.start):
                yield b

    @property
    def num_keys(self) -> int:
        return len(self._series)

    def id_of(self, key: FlowKey) -> int:
        s = self._series.get(key)
        return -1 if s is None else s.id

    # -- ingestion and rollover ---------------------------------------------------------------

    def add(self, flow: Flow) -> bool:
        """Bucket ``flow`` by its start time; False (dropped) if outside the ring."""
        bucket = self._bucket_for(flow.start_time)
        if bucket is None:
            return False
        key = flow.key
        series = self._series.get(key)
        if series is None:
            self._next_id += 1
            series = self._series[key] = _Series(self._next_id)
            self._by_id[self._next_id] = key
        existing = bucket.flows.get(key)
        if existing is None:
            agg = Flow(
                key,
                bucket.start,
                bucket.end,
                flow.source_labels,
                flow.dest_labels,
                flow.counters.copy(),
                flow.source_ips,
                flow.source_ports,
            )
            bucket.flows[key] = agg
            series.windows[bucket.start] = agg
        else:
            existing.fold_in(flow)
        return True

    def rollover(self, collect: bool = True) -> list[FlowResult]:
        """Advance one bucket; returns the streaming bucket's flows for the streams.

        ``collect=False`` (no stream is open) skips copying them: with many keys the copies
        were a fifth of the server's CPU under ingest, all thrown away (design/goldmane.md
        "Performance").
        """
        streamed = (
            [FlowResult(self._series[k].id, f.copy()) for k, f in self._slot(2).flows.items()]
            if collect
            else []
        )
        new_start = self._slot(0).end
        self._head = (self._head + 1) % len(self._buckets)
        recycled = self._buckets[self._head]
        for key in recycled.flows:
            series = self._series[key]
            del series.windows[recycled.start]
            if not series.windows:
                del self._series[key]
                del self._by_id[series.id]
        recycled.flows = {}
        recycled.pushed = False
        recycled.start, recycled.end = new_start, new_start + self.interval
        return streamed

    # -- queries --------------------------------------------------------------------------------

    def _matching(self, tr: TimeRange, f: pb.Filter | None) -> dict[FlowKey, int]:
        """Keys with data in range that pass the filter -> start of their oldest bucket there."""
        seen: dict[FlowKey, int] = {}
        # Newest first, so an older bucket overwrites: each key ends with its oldest start.
        for b in reversed(list(self._buckets_oldest_first(tr))):
            if b.flows:
                seen.update(dict.fromkeys(b.flows, b.start))
        pred = compile_filter(f)
        if pred is match_all:
            return seen
        return {k: s for k, s in seen.items() if pred(k)}

    def _aggregate(self, key: FlowKey, tr: TimeRange) -> Flow:
        result: Flow | None = None
        for start, f in self._series[key].windows.items():
            if not tr.contains(start):
                continue
            if result is None:
                result = f.copy()
            else:
                result.merge(f)
        assert result is not None
        return result

    def list(self, req: pb.FlowListRequest, now: int) -> ListResult:
        check_page(req.page, req.page_size)
        if len(req.sort_by) > 1:
            raise QueryError("at most one sort order is supported")
        if req.aggregation_interval % self.interval:
            raise QueryError(f"aggregation_interval must be a multiple of {self.interval}")
        tr = time_range(req.start_time_gte, req.start_time_lt, now)
        matched = self._matching(tr, req.filter if req.HasField("filter") else None)
        sort_by = req.sort_by[0].sort_by if req.sort_by else pb.Time
        series = self._series
        if sort_by == pb.Time:
            # Newest start first, then newest key; one int per key sorts fastest.
            # Newest start first, then newest key: one int per key (start, then id in the low
            # bits) compares in C, and the id leads back to the key.
            ranked = [s << ID_BITS | series[k].id for k, s in matched.items()]
            wanted = (req.page + 1) * req.page_size
            by_id = self._by_id
            if req.page_size > 0 and wanted * PARTIAL_SORT_RATIO < len(ranked):
                top = heapq.nlargest(wanted, ranked)[req.page * req.page_size :]
                page = Page(len(ranked), -(-len(ranked) // req.page_size))
                results = []
                for r in top:
                    k = by_id[r & ID_MASK]
                    results.append(FlowResult(r & ID_MASK, self._aggregate(k, tr)))
                return ListResult(results, page)
            ranked.sort(reverse=True)
            order = [by_id[r & ID_MASK] for r in ranked]
        elif sort_by in SORT_FIELDS:
            attr = SORT_FIELDS[sort_by]
            order = sorted(matched, key=lambda k: (getattr(k, attr), series[k].id))
        else:
            raise QueryError(f"unsupported sort order: {pb.SortBy.Name(sort_by)}")
        keys, page = paginate(order, req.page, req.page_size)
        return ListResult([FlowResult(series[k].id, self._aggregate(k, tr)) for k in keys], page)

    def filter_hints(self, req: pb.FilterHintsRequest, now: int) -> tuple[list[str], Page]:
        check_page(req.page, req.page_size)
        values_of = hint_values(req.type)
        tr = time_range(req.start_time_gte, req.start_time_lt, now)
        matched = self._matching(tr, req.filter if req.HasField("filter") else None)
        values = sorted({v for k in matched for v in values_of(k)})
        return paginate(values, req.page, req.page_size)

    def statistics(self, req: pb.StatisticsRequest, now: int) -> list[pb.StatisticsResult]:
        tr = time_range(req.start_time_gte, req.start_time_lt, now)
        if req.HasField("policy_match"):
            match: Callable = PolicyPredicate(req.policy_match)
        else:
            match = lambda h: True  # noqa: E731
        builder = StatisticsBuilder(req, match)
        for b in self._buckets_oldest_first(tr):
            builder.add_bucket(b.start, b.flows.values())
        return builder.results()

    def backfill(self, start_gte: int, f: pb.Filter | None, now: int) -> list[FlowResult]:
        """Per-bucket flows from ``start_gte`` (0 = now) up to the next bucket to stream."""
        tr = time_range(start_gte or now, 0, now)
        end = self.streaming_start
        pred = compile_filter(f)
        out = []
        for b in self._buckets_oldest_first(tr):
            if b.start >= end:
                break
            for k, fl in b.flows.items():
                if pred(k):
                    out.append(FlowResult(self._series[k].id, fl.copy()))
        return out

    def emit_collections(
        self, buckets_per_collection: int, push_after: int
    ) -> list[FlowCollection]:
        """The sink's next collections, oldest first, marking their buckets pushed.

        A collection spans ``buckets_per_collection`` buckets and ends ``push_after`` buckets
        before the filling one (so late flows have arrived). Walking back from the newest, it
        stops at a collection whose first bucket was already pushed, or one that would reach
        past the oldest bucket. Empty collections are skipped and stay unpushed.
        """
        if buckets_per_collection < 1 or push_after < 0:
            raise ValueError("need buckets_per_collection >= 1 and push_after >= 0")
        found: list[FlowCollection] = []
        end_back = 1 + push_after  # the collection's end = start of the bucket this far back
        n = len(self._buckets)
        while end_back + buckets_per_collection < n:
            first = self._slot(end_back + buckets_per_collection)
            if first.pushed:
                break
            tr = TimeRange(first.start, self._slot(end_back).start)
            keys = {k for b in self._buckets_oldest_first(tr) for k in b.flows}
            flows = sorted(keys, key=lambda k: self._series[k].id)
            if flows:
                found.append(FlowCollection(tr.gte, tr.lt, [self._aggregate(k, tr) for k in flows]))
                for b in self._buckets_oldest_first(tr):
                    b.pushed = True
            end_back += buckets_per_collection
        found.reverse()
        return found
