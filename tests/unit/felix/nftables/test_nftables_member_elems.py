"""``netlink.member_elems`` (templated element encoding) against the reference,
``set_member_elems`` member by member: same bytes, same errors."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.nftables.netlink import Unencodable, member_elems, set_member_elems

PORTS4 = ("ipv4_addr", "inet_proto", "inet_service")
PORTS6 = ("ipv6_addr", "inet_proto", "inet_service")

v4 = st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))
v6 = st.lists(st.integers(0, 0xFFFF), min_size=8, max_size=8).map(
    lambda g: ":".join(f"{x:x}" for x in g)
)
odd = st.sampled_from(
    ["255.255.255.255", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "::", "0.0.0.0", "1.2.3",
     "10.0.0.0/8", "10.0.0.1-10.0.0.9", "fd00::/64", "fd00::1", "10.0.0.1", "", "x",
     "::ffff:1.2.3.4"]
)  # fmt: skip
addr = st.one_of(v4, v6, odd)
member = st.one_of(
    addr,
    st.tuples(addr, st.one_of(st.integers(-1, 256), st.booleans()), st.integers(-1, 0x10000)),
    st.integers(),
    st.none(),
)
types = st.sampled_from(["ipv4_addr", "ipv6_addr", PORTS4, PORTS6, "inet_service", "ifname"])


def reference(members: list[Any], typ: Any, interval: bool) -> list[bytes] | str:
    out: list[bytes] = []
    try:
        for m in members:
            out += set_member_elems(m, typ, interval)
    except Exception as exc:  # the same error either way is the property
        return f"{type(exc).__name__}: {exc}"
    return out


@settings(max_examples=600, deadline=None)
@given(members=st.lists(member, max_size=6), typ=types, interval=st.booleans())
def test_member_elems_equals_the_reference(members: list[Any], typ: Any, interval: bool) -> None:
    want = reference(members, typ, interval)
    try:
        got: list[bytes] | str = member_elems(members, typ, interval)
    except Exception as exc:
        got = f"{type(exc).__name__}: {exc}"
    assert got == want


@pytest.mark.parametrize("typ", ["ipv4_addr", PORTS4])
def test_common_members_encode(typ: Any) -> None:
    members = ["10.0.0.1", "10.0.0.2"] if typ == "ipv4_addr" else [("10.0.0.1", 6, 80)]
    assert member_elems(members, typ, False) == [
        e for m in members for e in set_member_elems(m, typ, False)
    ]
    with pytest.raises(Unencodable):
        member_elems([("10.0.0.1", 6, 70000)], PORTS4, False)


# Many members of one shape, sharing a few (proto, port) pairs (the concatenation's cached
# tails), with the odd bad or unusual member (booleans, out-of-range ints, prefixes) among them.
port_pairs = st.tuples(
    st.one_of(st.sampled_from([6, 17, 132]), st.integers(-1, 256), st.booleans()),
    st.one_of(st.sampled_from([80, 8080]), st.integers(-1, 0x10000), st.booleans()),
)


@settings(max_examples=300, deadline=None)
@given(
    addrs=st.lists(st.one_of(v4, v6, odd), max_size=40),
    pairs=st.lists(port_pairs, min_size=1, max_size=4),
    typ=st.sampled_from([PORTS4, PORTS6]),
)
def test_many_port_members_equal_the_reference(
    addrs: list[str], pairs: list[tuple[Any, Any]], typ: Any
) -> None:
    members = [(a, *pairs[i % len(pairs)]) for i, a in enumerate(addrs)]
    want = reference(members, typ, False)
    try:
        got: list[bytes] | str = member_elems(members, typ, False)
    except Exception as exc:
        got = f"{type(exc).__name__}: {exc}"
    assert got == want


def chunks_reference(elems: list[bytes], limit: int) -> list[list[bytes]]:
    """The element-at-a-time cut ``ElementBatch.add`` made before ``element_chunks``."""
    out: list[list[bytes]] = []
    chunk: list[bytes] = []
    size = 0
    for e in elems:
        if chunk and size + len(e) > limit:
            out.append(chunk)
            chunk, size = [], 0
        chunk.append(e)
        size += len(e)
    if chunk:
        out.append(chunk)
    return out


@settings(max_examples=400, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 300), max_size=60),
    limit=st.sampled_from([1, 64, 100, 299, 300, 1000]),
)
def test_element_chunks_cut_where_the_loop_cut(sizes: list[int], limit: int) -> None:
    from calico.felix.nftables import netlink

    elems = [bytes([i % 256]) * n for i, n in enumerate(sizes)]
    with mock.patch.object(netlink, "ELEMENT_MESSAGE_BYTES", limit):
        got = netlink.element_chunks(elems)
    assert got == chunks_reference(elems, limit)


def test_element_chunks_at_the_real_limit() -> None:
    from calico.felix.nftables.netlink import ELEMENT_MESSAGE_BYTES, ElementBatch, element_chunks

    elems = member_elems([f"10.0.{i >> 8}.{i & 255}" for i in range(20_000)], "ipv4_addr", True)
    assert element_chunks(elems) == chunks_reference(elems, ELEMENT_MESSAGE_BYTES)
    assert element_chunks([]) == []
    batch = ElementBatch("inet", "calico")
    batch.add(False, "s", iter(elems))  # any iterable
    assert [m[2] for m in batch.messages] == chunks_reference(elems, ELEMENT_MESSAGE_BYTES)
