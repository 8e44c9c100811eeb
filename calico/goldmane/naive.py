"""The engine's reference: the same semantics as ``calico.goldmane.ring`` done the slow way.

It keeps every ingested record in one list and answers each query by scanning it. The property
tests drive it and ``BucketRing`` with the same flows, rollovers and queries and require the
same answers, so the ring's indexing and bookkeeping are checked against plain arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable

from calico.goldmane.filters import PolicyPredicate, compile_filter
from calico.goldmane.hints import hint_values
from calico.goldmane.queries import Page, QueryError, check_page, paginate, time_range
from calico.goldmane.ring import (
    INTERVAL,
    NUM_BUCKETS,
    SORT_FIELDS,
    FlowCollection,
    FlowResult,
    ListResult,
)
from calico.goldmane.stats import StatisticsBuilder
from calico.goldmane.types import SAMPLE_SIZE, Counters, Flow, FlowKey
from calico.proto.goldmane import api_pb2 as pb


class NaiveStore:
    def __init__(self, now: int, interval: int = INTERVAL, num_buckets: int = NUM_BUCKETS) -> None:
        self.interval = interval
        self.n = num_buckets
        self.head_start = now - now % interval + interval
        self.records: list[tuple[int, Flow]] = []  # (bucket start, record as ingested)
        self.ids: dict[FlowKey, int] = {}
        self.next_id = 0
        self.pushed: set[int] = set()  # bucket starts already emitted

    @property
    def oldest_start(self) -> int:
        return self.head_start - (self.n - 1) * self.interval

    def add(self, flow: Flow) -> bool:
        start = flow.start_time - flow.start_time % self.interval
        if not self.oldest_start <= start <= self.head_start:
            return False
        if flow.key not in self.ids:
            self.next_id += 1
            self.ids[flow.key] = self.next_id
        self.records.append((start, flow.copy()))
        return True

    def rollover(self) -> list[FlowResult]:
        streaming = self.head_start - 2 * self.interval
        out = self._per_bucket(lambda s: s == streaming, lambda k: True)
        dropped = self.oldest_start
        self.records = [(s, f) for s, f in self.records if s != dropped]
        self.head_start += self.interval
        self.pushed.discard(dropped)
        alive = {f.key for _, f in self.records}
        self.ids = {k: i for k, i in self.ids.items() if k in alive}
        return out

    def _per_bucket(
        self, in_range: Callable[[int], bool], pred: Callable[[FlowKey], bool]
    ) -> list[FlowResult]:
        groups: dict[tuple[int, FlowKey], Flow] = {}
        for s, f in self.records:
            if in_range(s) and pred(f.key):
                _fold(groups, (s, f.key), s, s + self.interval, f)
        ordered = sorted(groups.items(), key=lambda kv: kv[0][0])
        return [FlowResult(self.ids[k], f) for (_, k), f in ordered]

    def _aggregates(self, gte: int, lt: int, now: int, f: pb.Filter | None) -> dict[FlowKey, Flow]:
        tr = time_range(gte, lt, now)
        pred = compile_filter(f)
        out: dict[FlowKey, Flow] = {}
        for s, rec in self.records:
            if tr.contains(s) and pred(rec.key):
                _fold(out, rec.key, s, s + self.interval, rec)
        return out

    def list(self, req: pb.FlowListRequest, now: int) -> ListResult:
        check_page(req.page, req.page_size)
        if len(req.sort_by) > 1:
            raise QueryError("at most one sort order is supported")
        if req.aggregation_interval % self.interval:
            raise QueryError(f"aggregation_interval must be a multiple of {self.interval}")
        aggs = self._aggregates(
            req.start_time_gte,
            req.start_time_lt,
            now,
            req.filter if req.HasField("filter") else None,
        )
        sort_by = req.sort_by[0].sort_by if req.sort_by else pb.Time
        if sort_by == pb.Time:
            order = sorted(aggs.values(), key=lambda f: (-f.start_time, -self.ids[f.key]))
        elif sort_by in SORT_FIELDS:
            attr = SORT_FIELDS[sort_by]
            order = sorted(aggs.values(), key=lambda f: (getattr(f.key, attr), self.ids[f.key]))
        else:
            raise QueryError(f"unsupported sort order: {pb.SortBy.Name(sort_by)}")
        flows, page = paginate(order, req.page, req.page_size)
        return ListResult([FlowResult(self.ids[f.key], f) for f in flows], page)

    def filter_hints(self, req: pb.FilterHintsRequest, now: int) -> tuple[list[str], Page]:
        check_page(req.page, req.page_size)
        values_of = hint_values(req.type)
        aggs = self._aggregates(
            req.start_time_gte,
            req.start_time_lt,
            now,
            req.filter if req.HasField("filter") else None,
        )
        return paginate(sorted({v for k in aggs for v in values_of(k)}), req.page, req.page_size)

    def statistics(self, req: pb.StatisticsRequest, now: int) -> list[pb.StatisticsResult]:
        tr = time_range(req.start_time_gte, req.start_time_lt, now)
        match = PolicyPredicate(req.policy_match) if req.HasField("policy_match") else None
        builder = StatisticsBuilder(req, match or (lambda h: True))
        for start in sorted({s for s, _ in self.records if tr.contains(s)}):
            builder.add_bucket(start, [f for s, f in self.records if s == start])
        return builder.results()

    def backfill(self, start_gte: int, f: pb.Filter | None, now: int) -> list[FlowResult]:
        tr = time_range(start_gte or now, 0, now)
        end = self.head_start - 2 * self.interval
        return self._per_bucket(lambda s: tr.contains(s) and s < end, compile_filter(f))

    def emit_collections(
        self, buckets_per_collection: int, push_after: int
    ) -> list[FlowCollection]:
        width = buckets_per_collection * self.interval
        end = self.head_start - (1 + push_after) * self.interval
        found = []
        while end - width >= self.oldest_start and end - width not in self.pushed:
            start = end - width
            aggs: dict[FlowKey, Flow] = {}
            for s, rec in self.records:
                if start <= s < end:
                    _fold(aggs, rec.key, s, s + self.interval, rec)
            if aggs:
                flows = sorted(aggs.values(), key=lambda f: self.ids[f.key])
                found.append(FlowCollection(start, end, flows))
                self.pushed.update(range(start, end, self.interval))
            end = start
        found.reverse()
        return found


def _fold(into: dict, key: object, start: int, end: int, rec: Flow) -> None:
    cur = into.get(key)
    if cur is None:
        into[key] = Flow(
            rec.key,
            start,
            end,
            rec.source_labels,
            rec.dest_labels,
            Counters(),
            rec.source_ips,
            rec.source_ports,
        )
        into[key].counters.add(rec.counters)
    else:
        cur.counters.add(rec.counters)
        cur.source_labels &= rec.source_labels
        cur.dest_labels &= rec.dest_labels
        cur.source_ips = _smallest(cur.source_ips | rec.source_ips)
        cur.source_ports = _smallest(cur.source_ports | rec.source_ports)
        cur.start_time = min(cur.start_time, start)
        cur.end_time = max(cur.end_time, end)


def _smallest(values: frozenset) -> frozenset:
    """The oracle's own sample rule: the SAMPLE_SIZE smallest, computed the obvious way."""
    return frozenset(sorted(values)[:SAMPLE_SIZE])
