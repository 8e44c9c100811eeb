"""Conntrack DESTROY events: the parser (property-tested against an encoder), the aggregator's
final counters (both reporters, after a dump, before the verdict), and the collector's
``felix_collector_*`` metrics in a private registry."""

from __future__ import annotations

import socket
import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from calico.felix.collector import aggregator as aggregator_mod
from calico.felix.collector.aggregator import Aggregator
from calico.felix.collector.collector import Collector
from calico.felix.collector.conntrack import (
    IPCTNL_MSG_CT_DELETE,
    IPCTNL_MSG_CT_NEW,
    CtCounters,
    parse_dump,
    parse_events,
)
from calico.felix.collector.lookups import Endpoint
from calico.felix.collector.metrics import CollectorMetrics
from calico.felix.collector.nflog import FiveTuple
from calico.felix.messages import ActivePolicyUpdate, Policy, PolicyID
from calico.model import NetworkSetKey, WorkloadEndpointKey
from calico.model import values as v1
from calico.proto.goldmane import api_pb2 as pb


def nla(t: int, v: bytes, nested: bool = False) -> bytes:
    raw = struct.pack("=HH", 4 + len(v), t | (0x8000 if nested else 0)) + v
    return raw + b"\0" * ((-len(raw)) % 4)


def tuple_attr(t: FiveTuple, kernel_order: bool = True) -> bytes:
    """As the kernel lays a tuple out (the parser's fast path), or reordered (its walk)."""
    fam = socket.AF_INET6 if ":" in t.src else socket.AF_INET
    a, b = (3, 4) if fam == socket.AF_INET6 else (1, 2)
    ip = nla(a, socket.inet_pton(fam, t.src)) + nla(b, socket.inet_pton(fam, t.dst))
    l4 = [
        nla(1, bytes([t.proto])),
        nla(2, struct.pack("!H", t.sport)),
        nla(3, struct.pack("!H", t.dport)),
    ]
    parts = [nla(1, ip, True), nla(2, b"".join(l4 if kernel_order else l4[::-1]), True)]
    return b"".join(parts if kernel_order else parts[::-1])


def message(
    mtype: int, orig: FiveTuple, reply: FiveTuple, c: CtCounters, kernel_order: bool = True
) -> bytes:
    fam = socket.AF_INET6 if ":" in orig.src else socket.AF_INET
    body = struct.pack("=BBH", fam, 0, 0)
    body += nla(1, tuple_attr(orig, kernel_order), True)
    body += nla(2, tuple_attr(reply, kernel_order), True)
    for t, (p, b) in ((9, c[:2]), (10, c[2:])):
        body += nla(t, nla(1, struct.pack("!Q", p)) + nla(2, struct.pack("!Q", b)), True)
    return struct.pack("=IHHII", 16 + len(body), (1 << 8) | mtype, 0, 0, 0) + body


PORT = st.integers(0, 65535)
COUNT = st.integers(0, 2**64 - 1)


@st.composite
def entries(draw: st.DrawFn) -> tuple[FiveTuple, FiveTuple, CtCounters]:
    v6 = draw(st.booleans())
    addr = (
        st.ip_addresses(v=6).map(lambda a: socket.inet_ntop(socket.AF_INET6, a.packed))
        if v6
        else st.ip_addresses(v=4).map(str)
    )
    proto = draw(st.sampled_from([6, 17, 132]))
    orig = FiveTuple(proto, draw(addr), draw(addr), draw(PORT), draw(PORT))
    reply = FiveTuple(proto, draw(addr), orig.src, draw(PORT), orig.sport)
    counters = CtCounters(draw(COUNT), draw(COUNT), draw(COUNT), draw(COUNT))
    return orig, reply, counters


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(entries(), st.booleans(), st.booleans()), max_size=6))
def test_parse_events_round_trip_keeps_only_destroy_messages(items) -> None:
    data = b"".join(
        message(IPCTNL_MSG_CT_DELETE if destroy else IPCTNL_MSG_CT_NEW, o, r, c, kernel)
        for (o, r, c), destroy, kernel in items
    )
    want = [
        (o, FiveTuple(r.proto, r.dst, r.src, r.dport, r.sport), c)
        for (o, r, c), destroy, _ in items
        if destroy
    ]
    assert parse_events(data) == want
    # A dump datagram is the same framing with NEW messages: each parser keeps its own kind.
    assert len(parse_dump(data)[0]) == len(items) - len(want)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_parse_events_never_raises_on_garbage(data: bytes) -> None:
    framed = struct.pack("=IHHII", 16 + len(data), (1 << 8) | 2, 0, 0, 0) + data
    for blob in (data, framed):
        assert all(isinstance(c, CtCounters) for _, _, c in parse_events(blob))


TUP = FiveTuple(6, "10.65.0.1", "10.65.0.2", 40000, 8080)
SVC = FiveTuple(6, "10.65.0.1", "10.96.0.10", 40000, 80)  # the pre-DNAT view of TUP
SRC = Endpoint("client", "ns1", pb.WorkloadEndpoint)
DST = Endpoint("server", "ns1", pb.WorkloadEndpoint)


def agg_with(*directions: bool) -> Aggregator:
    agg = Aggregator(lambda: 100.0)
    for inbound in directions:
        key = agg.key_for(inbound, TUP, SRC, DST, [], [], pb.Allow)
        agg.on_verdict(inbound, TUP, key, 60)
    return agg


def counts(flows: list[pb.Flow]) -> dict[int, tuple[int, ...]]:
    return {
        f.Key.reporter: (
            f.packets_in,
            f.bytes_in,
            f.packets_out,
            f.bytes_out,
            f.num_connections_started,
            f.num_connections_completed,
            f.num_connections_live,
        )
        for f in flows
    }


def test_destroy_gives_both_reporters_the_final_counters_after_a_dump() -> None:
    agg = agg_with(True, False)
    agg.on_conntrack({TUP: CtCounters(3, 180, 2, 120)})
    assert agg.tracked == 2
    agg.on_destroyed([(SVC, TUP, CtCounters(10, 1000, 8, 700))])  # matched by its NAT view
    assert (agg.tracked, agg.destroyed) == (0, 2)
    agg.on_conntrack({})  # the resync finds nothing left to complete
    assert counts(agg.flush()) == {
        pb.Dst: (10, 1000, 8, 700, 1, 1, 0),
        pb.Src: (8, 700, 10, 1000, 1, 1, 0),
    }


def test_destroy_before_the_verdict_is_kept_until_the_next_dump_only() -> None:
    agg = Aggregator(lambda: 100.0)
    agg.on_destroyed([(TUP, TUP, CtCounters(6, 400, 4, 300))])
    key = agg.key_for(True, TUP, SRC, DST, [], [], pb.Allow)
    agg.on_verdict(True, TUP, key, 60)
    agg.on_conntrack({})  # gone: completed with the final counters the event carried
    assert counts(agg.flush()) == {pb.Dst: (6, 400, 4, 300, 1, 1, 0)}
    # The event is forgotten at that dump: a later connection on the tuple gets no counts.
    agg.on_verdict(True, TUP, key, 60)
    agg.on_conntrack({})
    assert counts(agg.flush()) == {pb.Dst: (0, 0, 0, 0, 1, 1, 0)}


def test_unmatched_events_are_bounded(monkeypatch) -> None:
    monkeypatch.setattr(aggregator_mod, "RECENT_SIZE", 2)
    agg = Aggregator(lambda: 100.0)
    agg.on_destroyed(
        [(t, t, CtCounters(1, 1, 1, 1)) for t in (TUP._replace(sport=p) for p in (1, 2, 3))]
    )
    assert len(agg._recent) == 2


def test_live_connection_untouched_by_another_tuples_destroy() -> None:
    agg = agg_with(True)
    agg.on_conntrack({TUP: CtCounters(2, 100, 1, 60)})
    agg.on_destroyed([(TUP._replace(sport=1), TUP._replace(sport=1), CtCounters(9, 9, 9, 9))])
    assert counts(agg.flush()) == {pb.Dst: (2, 100, 1, 60, 1, 0, 1)}
    assert agg.tracked == 1


class FakeClient:
    def push(self, flow: pb.Flow) -> None:
        pass


def sample(text: str, name: str) -> float:
    [line] = [ln for ln in text.splitlines() if ln.startswith(name + " ")]
    return float(line.split()[-1])


def test_metrics_upstream_names_read_at_scrape_time() -> None:
    registry = CollectorRegistry()
    c = Collector(FakeClient(), flush_interval=1, ct_dump=dict, clock=lambda: 5.0)
    c.metrics = CollectorMetrics(c, registry)
    text = generate_latest(registry).decode()
    assert sample(text, "felix_collector_epstats") == 0
    assert sample(text, 'felix_collector_allowed_flowlog_aggregator_store{action="allow"}') == 0
    for name in ("endpoints", "networksets"):
        assert sample(text, f"felix_collector_lookupcache_{name}") == 0
    assert sample(text, "felix_collector_lookups_cache_policies") == 0
    key = c.agg.key_for(True, TUP, SRC, DST, [], [], pb.Allow)
    c.agg.on_verdict(True, TUP, key, 60)
    deny = c.agg.key_for(True, TUP._replace(dport=9090), SRC, DST, [], [], pb.Deny)
    c.agg.on_verdict(True, TUP._replace(dport=9090), deny, 60)
    c.handle([])  # an empty batch is not observed
    c.poll_conntrack()  # one dump observed
    c.on_destroyed([(TUP, TUP, CtCounters(1, 60, 1, 60))])  # one event batch observed
    c.on_destroyed([])  # nothing to observe
    text = generate_latest(registry).decode()
    assert sample(text, "felix_collector_conntrack_processing_latency_seconds_count") == 2
    assert sample(text, "felix_collector_packet_info_processing_latency_seconds_count") == 0
    assert sample(text, 'felix_collector_allowed_flowlog_aggregator_store{action="allow"}') == 1
    assert sample(text, 'felix_collector_allowed_flowlog_aggregator_store{action="deny"}') == 1
    assert sample(text, "felix_collector_epstats") == 0  # the destroy completed it
    c.flush()
    text = generate_latest(registry).decode()
    assert sample(text, 'felix_collector_allowed_flowlog_aggregator_store{action="deny"}') == 0


def test_lookup_sizes_count_queued_and_applied_updates() -> None:
    lk = Collector(FakeClient(), flush_interval=1).lookups
    wep = v1.WorkloadEndpoint(state="active", name="calia", ipv4_nets=("10.65.0.1/32",))
    a, b = (WorkloadEndpointKey("n1", "k8s", f"ns1/{p}", "eth0") for p in ("a", "b"))
    ns_key = NetworkSetKey("ns1/ext")
    lk.on_endpoint(a, wep)
    lk.on_endpoint(b, wep)
    lk.on_endpoint(ns_key, v1.NetworkSet(nets=("192.0.2.0/24",)))
    assert lk.sizes() == (2, 1, 0)  # still queued
    lk.endpoint("10.65.0.1")  # the collector's first lookup applies the queue
    lk.on_endpoint(b, None)  # a queued removal of an applied endpoint
    assert lk.sizes() == (1, 1, 0)
    lk.on_endpoint(ns_key, None)
    lk.on_messages([ActivePolicyUpdate(PolicyID("p", "GlobalNetworkPolicy"), Policy())])
    assert lk.sizes() == (1, 0, 1)
