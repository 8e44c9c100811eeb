"""Pure block arithmetic, checked against naive reference models."""

from __future__ import annotations

import ipaddress
from collections import deque
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calico.ipam.blocks import (
    BadSequenceNumber,
    Block,
    affinity_name,
    block_walk,
    cidr_to_name,
    format_time,
    ip_to_ordinal,
    ordinal_to_ip,
    overlap_ordinals,
    walk_position,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def test_names_follow_upstream() -> None:
    assert cidr_to_name("10.0.0.0/26") == "10-0-0-0-26"
    assert cidr_to_name("fd00::c0/122") == "fd00--c0-122"
    assert affinity_name("node1", "10.0.0.64/26") == "node1-10-0-0-64-26"


def test_long_affinity_names_are_shortened_with_a_hash() -> None:
    host = "h" * 300
    name = affinity_name(host, "10.0.0.0/26")
    assert len(name) <= 253
    assert name.endswith("-10-0-0-0-26-" + name.rsplit("-", 1)[-1])
    assert affinity_name(host, "10.0.0.0/26") != affinity_name(host + "x", "10.0.0.0/26")


@given(st.sampled_from(["10.1.2.0/26", "192.168.0.0/28", "fd00::40/122", "10.0.0.0/30"]), st.data())
def test_ordinal_ip_roundtrip_matches_enumeration(cidr: str, data: st.DataObject) -> None:
    net = ipaddress.ip_network(cidr)
    every = list(net)  # oracle: the n-th address of the block
    ordinal = data.draw(st.integers(0, net.num_addresses - 1))
    assert ordinal_to_ip(net, ordinal) == every[ordinal]
    assert ip_to_ordinal(net, every[ordinal]) == ordinal


def test_every_address_is_assignable_including_network_and_broadcast() -> None:
    block = Block.new(ipaddress.ip_network("10.0.0.0/30"))
    got = block.allocate(4, "h")
    assert [str(block.ip(o)) for o in got] == ["10.0.0.0", "10.0.0.1", "10.0.0.2", "10.0.0.3"]


def test_overlap_ordinals_matches_membership() -> None:
    net = ipaddress.ip_network("10.0.0.0/26")
    res = [
        ipaddress.ip_network("10.0.0.4/30"),
        ipaddress.ip_network("10.0.0.63/32"),
        ipaddress.ip_network("10.0.0.0/8"),
    ]
    for r in ([res[0], res[1]], [res[2]]):
        expect = {i for i, ip in enumerate(net) if any(ip in n for n in r)}
        assert overlap_ordinals(net, r) == expect


def test_block_walk_visits_each_block_once_in_a_host_specific_order() -> None:
    pool = ipaddress.ip_network("10.0.0.0/22")
    a = list(block_walk(pool, 26, "node-a"))
    b = list(block_walk(pool, 26, "node-b"))
    assert sorted(a) == sorted(b) == list(pool.subnets(new_prefix=26))
    assert a != b  # different start offsets (true for these two names)
    assert [walk_position(pool, c, "node-a") for c in a] == list(range(16))
    big = ipaddress.ip_network("fd00::/64")
    assert next(block_walk(big, 122, "x")).prefixlen == 122  # lazy: no enumeration


def test_reserved_ordinals_are_skipped_but_keep_their_queue_place() -> None:
    block = Block.new(ipaddress.ip_network("10.0.0.0/29"))
    assert block.allocate(3, "h", skip={0, 2}) == [1, 3, 4]
    assert block.unallocated[:2] == [0, 2]


def test_release_then_collect_respects_cooldown() -> None:
    block = Block.new(ipaddress.ip_network("10.0.0.0/29"))
    block.allocate(2, "h", {"pod": "p"})
    released, missing, handles = block.release([0, 5], format_time(T0))
    assert released == [0] and missing == [5] and handles == {0: "h"}
    assert block.is_cooling(0) and block.in_use() == 2 and block.cooling() == 1
    assert block.collect(T0 + timedelta(seconds=5), 10) == []
    assert block.collect(T0 + timedelta(seconds=10), 10) == [0]
    assert block.unallocated[-1] == 0 and block.attr_of(0) is None
    assert block.ordinals_for_handle("h") == [1]
    # Releasing a cooling address again is a no-op, not an error.
    block.release([1], format_time(T0))
    assert block.release([1], format_time(T0))[0] == []


def test_sequence_number_guards_release() -> None:
    block = Block.new(ipaddress.ip_network("10.0.0.0/30"))
    block.sequence_number = 7
    (o,) = block.allocate(1, "h")
    with pytest.raises(BadSequenceNumber):
        block.release([o], format_time(T0), {o: 6})
    assert block.release([o], format_time(T0), {o: 7})[0] == [o]


def test_attributes_are_shared_and_pruned() -> None:
    block = Block.new(ipaddress.ip_network("10.0.0.0/29"))
    block.allocate(2, "a", {"k": "v"})
    block.allocate(1, "b")
    assert len(block.attributes) == 2
    block.release([0, 1], format_time(T0))
    block.collect(T0, 0)
    assert [a.handle_id for a in block.attributes] == ["b"]
    assert block.allocations[2] == 0


class Oracle:
    """Naive FIFO model: a deque of free ordinals and a dict of owners."""

    def __init__(self, size: int) -> None:
        self.free = deque(range(size))
        self.owner: dict[int, str] = {}

    def allocate(self, n: int, handle: str, skip: set[int]) -> list[int]:
        taken, kept = [], []
        while self.free and len(taken) < n:
            o = self.free.popleft()
            (kept if o in skip else taken).append(o)
        self.free.extendleft(reversed(kept))
        for o in taken:
            self.owner[o] = handle
        return taken

    def release(self, ordinals: list[int]) -> None:
        for o in dict.fromkeys(ordinals):
            if o in self.owner:
                del self.owner[o]
                self.free.append(o)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("alloc"), st.integers(1, 5), st.sampled_from("abc")),
        st.tuples(st.just("release"), st.lists(st.integers(0, 15), max_size=4), st.none()),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ops, st.sets(st.integers(0, 15), max_size=3))
def test_block_matches_fifo_oracle(steps: list[tuple], skip: set[int]) -> None:
    block = Block.new(ipaddress.ip_network("10.0.0.0/28"))
    oracle = Oracle(16)
    clock = T0
    for kind, arg, handle in steps:
        clock += timedelta(seconds=1)
        if kind == "alloc":
            assert block.allocate(arg, handle, skip=skip) == oracle.allocate(arg, handle, skip)
        else:
            block.release(arg, format_time(clock))
            block.collect(clock, 0)
            oracle.release(arg)
        assert block.unallocated == list(oracle.free)
        owners = {o: block.attr_of(o).handle_id for o in range(16) if block.attr_of(o)}
        assert owners == oracle.owner
        assert sorted(block.unallocated + list(owners)) == list(range(16))
