"""``calico.felix.routetable.rtnl`` against the bytes pyroute2 0.9.7 sent for the same calls.

The vectors were captured with ``strace -e sendto -xx`` from ``IPRoute.route``/``IPRoute.neigh``
called with the keywords the route table used (oif 3, proto 3, metric 1024); the nlmsghdr's
sequence and port id are not compared. The kernel-level comparison over random sequences is
``tests/integration/felix/netlink/test_routetable_rtnl_differential.py``.
"""

from __future__ import annotations

import socket
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.felix import nlbatch as nb
from calico.felix.routetable import rtnl

REQ_ACK = nb.NLM_F_REQUEST | nb.NLM_F_ACK
# RTA_TABLE 254, RTA_OIF 3, RTA_PRIORITY 1024
ATTRS_TAIL = " 0800 0f00 fe00 0000 0800 0400 0300 0000 0800 0600 0004 0000"
V4_ROUTE = "0220 0000 fe03 fd01 0000 0000 0800 0100 0a41 0001" + ATTRS_TAIL
V4_DEL = "0220 0000 fe03 fd00 0000 0000 0800 0100 0a41 0001" + ATTRS_TAIL
V6_ROUTE = (
    "0a80 0000 fe03 0001 0000 0000 1400 0100 fd00 0000 0000 0000 0000 0000 0000 0001" + ATTRS_TAIL
)
NEIGH_SET = "0200 0000 0300 0000 8000 0000 0800 0100 0a41 0001 0a00 0200 eeee eeee eeee 0000"
NEIGH_DEL = "0200 0000 0300 0000 8000 0000 0800 0100 0a41 0001"


def wire(req: nb.Request, seq: int = 256) -> tuple[int, int, int, bytes]:
    raw = req.encode(seq)
    length, mtype, flags, got_seq, _ = struct.unpack_from("=IHHII", raw)
    assert length == len(raw) and got_seq == seq
    return mtype, flags, length, raw[16:]


@pytest.mark.parametrize(
    ("req", "mtype", "flags", "body"),
    [
        (
            rtnl.route_replace("10.65.0.1/32", 3, proto=3, scope=253, metric=1024),
            nb.RTM_NEWROUTE,
            REQ_ACK | nb.NLM_F_CREATE | nb.NLM_F_REPLACE,
            V4_ROUTE,
        ),
        (
            rtnl.route_delete("10.65.0.1/32", 3, proto=3, scope=253, metric=1024),
            nb.RTM_DELROUTE,
            REQ_ACK,
            V4_DEL,
        ),
        (
            rtnl.route_replace("fd00::1/128", 3, proto=3, scope=0, metric=1024),
            nb.RTM_NEWROUTE,
            REQ_ACK | nb.NLM_F_CREATE | nb.NLM_F_REPLACE,
            V6_ROUTE,
        ),
        (
            rtnl.route_replace("fd00::1/128", 3, proto=3, scope=0, metric=0),  # 0 -> 1024 on v6
            nb.RTM_NEWROUTE,
            REQ_ACK | nb.NLM_F_CREATE | nb.NLM_F_REPLACE,
            V6_ROUTE,
        ),
        (
            rtnl.neigh_replace("10.65.0.1", "ee:ee:ee:ee:ee:ee", 3),
            nb.RTM_NEWNEIGH,
            REQ_ACK | nb.NLM_F_CREATE | nb.NLM_F_REPLACE,
            NEIGH_SET,
        ),
        (rtnl.neigh_delete("10.65.0.1", 3), nb.RTM_DELNEIGH, REQ_ACK, NEIGH_DEL),
    ],
)
def test_bytes_equal_pyroute2s(req: nb.Request, mtype: int, flags: int, body: str) -> None:
    got_type, got_flags, length, got_body = wire(req)
    assert (got_type, got_flags) == (mtype, flags)
    assert got_body == bytes.fromhex(body.replace(" ", ""))
    assert length == 16 + len(got_body)


def test_a_v4_metric_of_zero_is_sent_as_zero() -> None:
    body = rtnl.route_replace("10.65.0.1/32", 3, proto=3, scope=253, metric=0).body
    assert nb.parse_attrs(body, 12)[rtnl.RTA_PRIORITY] == b"\0\0\0\0"


@given(
    v6=st.booleans(),
    raw=st.binary(min_size=16, max_size=16),
    plen=st.integers(0, 128),
    oif=st.integers(1, 2**31 - 1),
    proto=st.integers(0, 255),
    scope=st.sampled_from((0, 200, 253, 254)),
    metric=st.integers(0, 2**32 - 1),
)
def test_route_requests_decode_to_what_was_asked(
    v6: bool, raw: bytes, plen: int, oif: int, proto: int, scope: int, metric: int
) -> None:
    family = socket.AF_INET6 if v6 else socket.AF_INET
    addr = raw if v6 else raw[:4]
    plen = plen if v6 else plen % 33
    cidr = f"{socket.inet_ntop(family, addr)}/{plen}"
    for req, rtype in (
        (rtnl.route_replace(cidr, oif, proto=proto, scope=scope, metric=metric), 1),
        (rtnl.route_delete(cidr, oif, proto=proto, scope=scope, metric=metric), 0),
    ):
        r = nb.decode_route(req.body)
        assert (r.family, r.dst_len, r.table, r.proto, r.scope, r.rtype, r.flags) == (
            family,
            plen,
            254,
            proto,
            scope,
            rtype,
            0,
        )
        want_metric = 1024 if v6 and metric == 0 else metric
        assert r.attrs == {
            rtnl.RTA_DST: addr,
            rtnl.RTA_TABLE: struct.pack("=I", 254),
            rtnl.RTA_OIF: struct.pack("=I", oif),
            rtnl.RTA_PRIORITY: struct.pack("=I", want_metric),
        }
        assert req.what.endswith(cidr)


@given(
    v6=st.booleans(),
    raw=st.binary(min_size=16, max_size=16),
    mac=st.binary(min_size=6, max_size=6),
    ifindex=st.integers(1, 2**31 - 1),
)
def test_neighbour_requests_decode_to_what_was_asked(
    v6: bool, raw: bytes, mac: bytes, ifindex: int
) -> None:
    family = socket.AF_INET6 if v6 else socket.AF_INET
    addr = raw if v6 else raw[:4]
    ip = socket.inet_ntop(family, addr)
    n = nb.decode_neigh(rtnl.neigh_replace(ip, nb.mac_text(mac), ifindex).body)
    assert (n.family, n.ifindex, n.state, n.flags) == (family, ifindex, 0x80, 0)
    assert n.attrs == {rtnl.NDA_DST: addr, rtnl.NDA_LLADDR: mac}
    d = nb.decode_neigh(rtnl.neigh_delete(ip, ifindex).body)
    assert (d.family, d.ifindex, d.attrs) == (family, ifindex, {rtnl.NDA_DST: addr})
