"""calico.cni.rtnl's encoding: rtattrs round-trip, padding, framing and malformed input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.cni import rtnl

attrs = st.lists(st.tuples(st.integers(0, 0x3FFF), st.binary(max_size=40)), max_size=8)


@given(attrs)
def test_attrs_round_trip_and_stay_aligned(items: list[tuple[int, bytes]]) -> None:
    data = b"".join(rtnl.attr(kind, payload) for kind, payload in items)
    assert len(data) % 4 == 0
    expected: dict[int, bytes] = {}
    for kind, payload in items:
        expected[kind] = payload  # the last of a type wins
    assert rtnl.parse_attrs(data) == expected


def test_attr_layout() -> None:
    assert rtnl.attr(3, b"eth0") == struct.pack("=HH", 8, 3) + b"eth0"
    assert rtnl.attr_str(3, "eth0") == struct.pack("=HH", 9, 3) + b"eth0\0" + b"\0\0\0"
    assert rtnl.attr_u32(4, 1500) == struct.pack("=HHI", 8, 4, 1500)


def test_nested_flag_bits_are_dropped_from_the_type() -> None:
    nested = struct.pack("=HH", 8, 0x8000 | 18) + b"abcd"
    assert rtnl.parse_attrs(nested) == {18: b"abcd"}


@pytest.mark.parametrize(
    "data",
    [struct.pack("=HH", 3, 1), struct.pack("=HH", 12, 1) + b"ab"],
    ids=["shorter than its header", "longer than the buffer"],
)
def test_malformed_attrs_are_refused(data: bytes) -> None:
    with pytest.raises(ValueError, match="malformed rtattr at offset 0"):
        rtnl.parse_attrs(data)


@given(st.lists(st.tuples(st.integers(0, 0xFFFF), st.integers(1, 2**31), st.binary(max_size=30)),
                max_size=5))  # fmt: skip
def test_message_framing(msgs: list[tuple[int, int, bytes]]) -> None:
    data = b""
    for mtype, seq, body in msgs:
        size = 16 + len(body)
        data += struct.pack("=IHHII", size, mtype, 0, seq, 0) + body + b"\0" * (-size % 4)
    parsed = rtnl.nlmsg.split(data, strict=True)
    assert [(t, s, b) for t, _f, s, b in parsed] == msgs


def test_truncated_message_is_refused() -> None:
    with pytest.raises(ValueError, match="malformed netlink message"):
        rtnl.nlmsg.split(struct.pack("=IHHII", 40, 16, 0, 1, 0), strict=True)


def test_netlink_error_carries_errno() -> None:
    exc = rtnl.NetlinkError(17, "add veth cali1")
    assert isinstance(exc, OSError)
    assert exc.code == exc.errno == 17
    assert str(exc) == "[Errno 17] add veth cali1: File exists"
