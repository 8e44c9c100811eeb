"""The bucket ring against the naive reference, on random flows, rollovers and queries."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calico.goldmane import ring as ring_module
from calico.goldmane.naive import NaiveStore
from calico.goldmane.queries import QueryError
from calico.goldmane.ring import BucketRing, FlowResult, ListResult
from calico.goldmane.types import Counters, Flow, FlowKey, PolicyHit
from calico.proto.goldmane import api_pb2 as pb

T0 = 1_700_000_007  # deliberately not bucket-aligned
INTERVAL = 15
NUM = 6

NAMES = ["a", "ab", "b"]
NAMESPACES = ["", "ns1", "Global"]

hits = st.builds(
    PolicyHit,
    kind=st.sampled_from([pb.CalicoNetworkPolicy, pb.GlobalNetworkPolicy, pb.Profile]),
    namespace=st.sampled_from(["", "ns1"]),
    name=st.sampled_from(["p1", "p2"]),
    tier=st.sampled_from(["default", "t1"]),
    action=st.sampled_from([pb.Allow, pb.Deny, pb.Pass]),
    policy_index=st.just(0),
    rule_index=st.integers(0, 1),
)
eot = st.builds(lambda t: PolicyHit(pb.EndOfTier, t.namespace, "", t.tier, pb.Deny, 1, -1, t), hits)
keys = st.builds(
    FlowKey,
    source_name=st.sampled_from(NAMES),
    source_namespace=st.sampled_from(NAMESPACES),
    dest_name=st.sampled_from([*NAMES, "pub"]),
    dest_namespace=st.sampled_from(NAMESPACES),
    dest_port=st.sampled_from([80, 443]),
    proto=st.sampled_from(["tcp", "udp"]),
    reporter=st.sampled_from([pb.Src, pb.Dst]),
    action=st.sampled_from([pb.Allow, pb.Deny]),
    enforced=st.lists(st.one_of(hits, eot), max_size=2).map(tuple),
    pending=st.lists(hits, max_size=1).map(tuple),
    source_ip=st.sampled_from(["", "", "198.51.100.7"]),
)
labels = st.frozensets(st.sampled_from(["app=x", "env=prod", "tier=web"]))


@st.composite
def flows(draw: st.DrawFn, now: int) -> Flow:
    start = now + draw(st.integers(-(NUM + 1) * INTERVAL, 2 * INTERVAL))
    c = Counters(*draw(st.lists(st.integers(0, 1000), min_size=7, max_size=7)))
    ips = st.frozensets(st.sampled_from([f"10.0.0.{i}" for i in range(14)]), max_size=6)
    ports = st.frozensets(st.integers(1024, 1040), max_size=8)
    return Flow(draw(keys), start, start + 5, draw(labels), draw(labels), c, draw(ips), draw(ports))


string_matches = st.builds(
    pb.StringMatch,
    value=st.sampled_from([*NAMES, "", "ns", "ns1", "PUBLIC NETWORK", "-", "tcp"]),
    type=st.sampled_from([pb.Exact, pb.Fuzzy]),
)


@st.composite
def filters(draw: st.DrawFn) -> pb.Filter | None:
    if draw(st.booleans()):
        return None
    sm = st.lists(string_matches, max_size=2)
    f = pb.Filter(
        source_names=draw(sm),
        source_namespaces=draw(sm),
        dest_names=draw(sm),
        dest_namespaces=draw(st.lists(string_matches, max_size=1)),
        protocols=draw(st.lists(string_matches, max_size=1)),
        dest_ports=[
            pb.PortMatch(port=p) for p in draw(st.lists(st.sampled_from([80, 8]), max_size=1))
        ],
        actions=draw(st.lists(st.sampled_from([pb.Allow, pb.Deny]), max_size=1)),
        pending_actions=draw(st.lists(st.sampled_from([pb.Allow, pb.Pass]), max_size=1)),
        reporter=draw(st.sampled_from([pb.ReporterUnspecified, pb.Src, pb.Dst])),
    )
    if draw(st.booleans()):
        f.policies.append(
            pb.PolicyMatch(
                kind=draw(st.sampled_from([pb.KindUnspecified, pb.CalicoNetworkPolicy])),
                tier=draw(string_matches),
                name=pb.StringMatch(value=draw(st.sampled_from(["", "p1", "p"])), type=pb.Fuzzy),
                action=draw(st.sampled_from([pb.ActionUnspecified, pb.Deny])),
            )
        )
    return f


times = st.one_of(
    st.just(0),
    st.integers(-(NUM + 2) * INTERVAL, -1),
    st.integers(T0 - 3 * INTERVAL, T0 + (NUM + 6) * INTERVAL),
)


def _flat(results: list[FlowResult]) -> list[tuple]:
    return [
        (
            r.id,
            r.flow.key,
            r.flow.start_time,
            r.flow.end_time,
            r.flow.source_labels,
            r.flow.dest_labels,
            r.flow.counters,
            r.flow.source_ips,
            r.flow.source_ports,
        )
        for r in results
    ]


def _normal(x: object) -> object:
    if isinstance(x, ListResult):
        return (_flat(x.flows), x.page)
    if isinstance(x, list) and x and isinstance(x[0], FlowResult):
        return _flat(x)
    return x


def _same(ring: BucketRing, naive: NaiveStore, method: str, *args: object) -> None:
    """Both give equal answers, or both reject the request with the same message."""
    try:
        expected = _normal(getattr(naive, method)(*args))
    except QueryError as exc:
        try:
            getattr(ring, method)(*args)
        except QueryError as got:
            assert str(got) == str(exc)
            return
        raise AssertionError(f"ring accepted what the reference rejects: {exc}") from None
    assert _normal(getattr(ring, method)(*args)) == expected


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 10**6)),
        st.tuples(st.just("roll"), st.integers(1, 3)),
        st.tuples(st.just("query"), st.integers(0, 10**6)),
        st.tuples(st.just("emit"), st.integers(0, 0)),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), script=ops)
def test_ring_answers_as_the_reference(data: st.DataObject, script: list) -> None:
    now = T0
    ring = BucketRing(now, INTERVAL, NUM)
    naive = NaiveStore(now, INTERVAL, NUM)
    per_collection, push_after = data.draw(st.integers(1, 3)), data.draw(st.integers(0, 2))
    for op, count in script:
        if op == "add":
            for fl in data.draw(st.lists(flows(now), min_size=1, max_size=8)):
                assert ring.add(fl.copy()) == naive.add(fl.copy())
        elif op == "emit":
            got = ring.emit_collections(per_collection, push_after)
            assert got == naive.emit_collections(per_collection, push_after)
        elif op == "roll":
            for _ in range(count):
                now += INTERVAL
                assert _flat(ring.rollover()) == _flat(naive.rollover())
        else:
            f = data.draw(filters())
            req = pb.FlowListRequest(
                start_time_gte=data.draw(times),
                start_time_lt=data.draw(times),
                page=data.draw(st.integers(0, 3)),
                page_size=data.draw(st.integers(0, 4)),
                sort_by=[
                    pb.SortOption(sort_by=s)
                    for s in data.draw(
                        st.lists(st.sampled_from(list(pb.SortBy.values())), max_size=2)
                    )
                ],
                aggregation_interval=data.draw(st.sampled_from([0, 15, 30, 20])),
            )
            if f is not None:
                req.filter.CopyFrom(f)
            _same(ring, naive, "list", req, now)
            hreq = pb.FilterHintsRequest(
                type=data.draw(st.sampled_from(list(pb.FilterType.values()))),
                start_time_gte=req.start_time_gte,
                start_time_lt=req.start_time_lt,
                page=req.page,
                page_size=req.page_size,
            )
            if f is not None:
                hreq.filter.CopyFrom(f)
            _same(ring, naive, "filter_hints", hreq, now)
            sreq = pb.StatisticsRequest(
                start_time_gte=req.start_time_gte,
                start_time_lt=req.start_time_lt,
                type=data.draw(st.sampled_from(list(pb.StatisticType.values()))),
                group_by=data.draw(st.sampled_from(list(pb.StatisticsGroupBy.values()))),
                time_series=data.draw(st.booleans()),
            )
            if data.draw(st.booleans()):
                sreq.policy_match.CopyFrom(pb.PolicyMatch(action=pb.Deny))
            _same(ring, naive, "statistics", sreq, now)
            _same(ring, naive, "backfill", data.draw(times), f, now)
    assert ring.num_keys == len(naive.ids)


def _with_port(f: Flow, port: int) -> Flow:
    f.key = f.key._replace(dest_port=port)
    return f


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    batch=st.lists(st.tuples(flows(T0), st.integers(1, 30)), min_size=30, max_size=80).map(
        lambda pairs: [_with_port(f, p) for f, p in pairs]
    ),
    page=st.integers(0, 6),
    page_size=st.integers(1, 4),
    flt=filters(),
)
def test_small_pages_of_many_keys_as_the_reference(
    batch: list[Flow], page: int, page_size: int, flt: pb.Filter | None
) -> None:
    # Many keys and small pages: both the partial-sort (heap) path and the full sort.
    ring = BucketRing(T0, INTERVAL, NUM)
    naive = NaiveStore(T0, INTERVAL, NUM)
    for fl in batch:
        ring.add(fl.copy())
        naive.add(fl.copy())
    req = pb.FlowListRequest(page=page, page_size=page_size)
    if flt is not None:
        req.filter.CopyFrom(flt)
    _same(ring, naive, "list", req, T0)
    saved, ring_module.PARTIAL_SORT_RATIO = ring_module.PARTIAL_SORT_RATIO, 1
    try:
        _same(ring, naive, "list", req, T0)
    finally:
        ring_module.PARTIAL_SORT_RATIO = saved
