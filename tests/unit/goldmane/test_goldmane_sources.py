"""Source IP/port extension in the engine: the bounded sample's rule, the proto edge, and
source_ip as part of the key (design/goldmane.md "Source IPs and ports")."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from calico.goldmane.convert import flow_from_proto, flow_to_proto, key_from_proto, key_to_proto
from calico.goldmane.ring import BucketRing
from calico.goldmane.types import SAMPLE_SIZE, Counters, Flow, FlowKey, sample_union
from calico.proto.goldmane import api_pb2 as pb

T0 = 1_700_000_010
sets = st.frozensets(st.integers(0, 40), max_size=14)


def test_sample_union_boundaries() -> None:
    ten = frozenset(range(10))
    assert SAMPLE_SIZE == 10
    assert sample_union(ten, frozenset()) is ten
    assert sample_union(frozenset(), ten) == ten  # exactly the bound: all kept
    assert sample_union(ten, frozenset({-1})) == frozenset(range(-1, 9))  # 11: smallest ten
    assert sample_union(ten, frozenset({99})) == ten
    assert sample_union(frozenset({"b"}), frozenset({"a"})) == {"a", "b"}


@given(sets, sets, sets)
def test_sample_union_is_order_independent_and_the_smallest(a, b, c) -> None:
    a, b, c = (sample_union(frozenset(), x) for x in (a, b, c))  # as ingested: bounded
    left = sample_union(sample_union(a, b), c)
    assert left == sample_union(a, sample_union(b, c)) == sample_union(sample_union(c, a), b)
    assert left == frozenset(sorted(a | b | c)[:SAMPLE_SIZE])


def test_proto_edge_round_trip_and_oversized_senders_bounded() -> None:
    k = FlowKey(source_name="pub", source_type=pb.Network, dest_port=80, source_ip="203.0.113.9")
    assert key_from_proto(key_to_proto(k)) == k
    f = Flow(k, T0, T0 + 15, frozenset(), frozenset(), Counters(), frozenset({"203.0.113.9"}))
    f.source_ports = frozenset({5, 1})
    msg = flow_to_proto(f)
    assert (list(msg.source_ips), list(msg.source_ports)) == (["203.0.113.9"], [1, 5])
    assert flow_from_proto(msg) == f
    msg.source_ports[:] = list(range(30, 0, -1))  # a sender ignoring the bound
    assert flow_from_proto(msg).source_ports == frozenset(range(1, 11))


def test_ring_keys_on_source_ip_and_merges_samples_within_and_across_buckets() -> None:
    ring = BucketRing(T0)
    base = FlowKey(source_name="pub", source_type=pb.Network, dest_port=80, proto="tcp")

    def add(ip: str, start: int, ports: set[int]) -> None:
        k = base._replace(source_ip=ip)
        c = Counters(packets_in=1)
        ring.add(Flow(k, start, start + 5, frozenset(), frozenset(), c, frozenset({ip}), ports))

    add("198.51.100.1", T0, set(range(100, 108)))
    add("198.51.100.1", T0 + 1, set(range(90, 95)))
    add("198.51.100.1", T0 - 15, {1})
    add("198.51.100.2", T0, {7})
    res = {r.flow.key.source_ip: r.flow for r in ring.list(pb.FlowListRequest(), T0).flows}
    assert set(res) == {"198.51.100.1", "198.51.100.2"}
    one = res["198.51.100.1"]
    assert one.counters.packets_in == 3
    assert sorted(one.source_ports) == [1, *range(90, 95), 100, 101, 102, 103]
    assert res["198.51.100.2"].source_ports == {7}
