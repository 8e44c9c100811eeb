"""The struct-encoded rtnetlink messages (calico.felix.nlbatch): cross-checked
against pyroute2's own parser and round-tripped through our dump decoder."""

from __future__ import annotations

import ipaddress
import socket

from hypothesis import given, settings
from hypothesis import strategies as st
from pyroute2.netlink.rtnl.ndmsg import ndmsg
from pyroute2.netlink.rtnl.rtmsg import rtmsg

from calico.felix import nlbatch as nb

v4 = st.integers(0, 2**32 - 1).map(lambda i: str(ipaddress.IPv4Address(i)))
v6 = st.integers(0, 2**128 - 1).map(lambda i: str(ipaddress.IPv6Address(i)))
macs = st.binary(min_size=6, max_size=6).map(nb.mac_text)


def parse_with_pyroute2(cls, data: bytes):
    msg = cls(data)
    msg.decode()
    return msg


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(v4, v6),
    st.integers(0, 128),
    st.integers(1, 2**31 - 1),
    st.one_of(st.none(), st.integers(0, 2**32 - 1)),
    st.integers(0, 255),
    st.sampled_from([0, 253]),
    st.booleans(),
    st.integers(0, 9000),
    st.sampled_from([0, 1024]),
)
def test_route_replace_decodes_identically_in_pyroute2_and_ours(
    addr, plen, oif, gw, proto, scope, onlink, mtu, prio
):
    plen = min(plen, 32 if ":" not in addr else 128)
    cidr = f"{addr}/{plen}"
    if gw is not None:  # a gateway of the route's own family
        gw = str(ipaddress.ip_address(gw if ":" not in addr else (1 << 127) + gw))
    else:
        gw = ""
    req = nb.route_replace(
        cidr,
        oif=oif,
        gateway=gw,
        proto=proto,
        scope=scope,
        onlink=onlink,
        mtu=mtu,
        priority=prio,
    )
    wire = req.encode(42)
    theirs = parse_with_pyroute2(rtmsg, wire)
    assert theirs["header"]["type"] == nb.RTM_NEWROUTE
    assert theirs["header"]["sequence_number"] == 42
    assert theirs["header"]["length"] == len(wire)
    assert theirs["header"]["flags"] == (
        nb.NLM_F_REQUEST | nb.NLM_F_ACK | nb.NLM_F_CREATE | nb.NLM_F_REPLACE
    )
    assert (theirs["dst_len"], theirs["proto"], theirs["scope"], theirs["table"]) == (
        plen,
        proto,
        scope,
        254,
    )
    assert theirs["flags"] == (nb.RTNH_F_ONLINK if onlink else 0)
    assert ipaddress.ip_address(theirs.get_attr("RTA_DST")) == ipaddress.ip_address(addr)
    assert theirs.get_attr("RTA_OIF") == oif
    assert theirs.get_attr("RTA_PRIORITY") == (prio or None)
    if gw:
        assert ipaddress.ip_address(theirs.get_attr("RTA_GATEWAY")) == ipaddress.ip_address(gw)
    metrics = theirs.get_attr("RTA_METRICS")
    assert (metrics.get_attr("RTAX_MTU") if metrics else 0) == mtu
    ours = nb.decode_route(wire[16:])
    assert nb.ip_text(ours.attrs[nb.RTA_DST]) == str(ipaddress.ip_address(addr))
    assert (ours.dst_len, ours.proto, ours.scope, ours.flags) == (
        plen,
        proto,
        scope,
        nb.RTNH_F_ONLINK if onlink else 0,
    )


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 2**31 - 1), st.one_of(v4, v6), macs)
def test_neighbour_and_fdb_requests_decode_in_pyroute2_and_ours(ifindex, ip, mac):
    for req, family, state, flags in (
        (
            nb.neigh_replace(ifindex, ip, mac),
            socket.AF_INET6 if ":" in ip else socket.AF_INET,
            nb.NUD_PERMANENT,
            0,
        ),
        (nb.fdb_replace(ifindex, mac, ip), socket.AF_BRIDGE, nb.NUD_PERMANENT, nb.NTF_SELF),
    ):
        wire = req.encode(7)
        theirs = parse_with_pyroute2(ndmsg, wire)
        assert (theirs["family"], theirs["ifindex"], theirs["state"], theirs["flags"]) == (
            family,
            ifindex,
            state,
            flags,
        )
        assert theirs.get_attr("NDA_LLADDR") == mac
        assert ipaddress.ip_address(theirs.get_attr("NDA_DST")) == ipaddress.ip_address(ip)
        ours = nb.decode_neigh(wire[16:])
        assert nb.mac_text(ours.attrs[nb.NDA_LLADDR]) == mac
        assert nb.ip_text(ours.attrs[nb.NDA_DST]) == str(ipaddress.ip_address(ip))


def test_deletes_use_wildcards_and_no_create_flags():
    req = nb.route_delete("10.0.0.0/26", 0)
    theirs = parse_with_pyroute2(rtmsg, req.encode(1))
    assert theirs["header"]["flags"] == nb.NLM_F_REQUEST | nb.NLM_F_ACK
    assert (theirs["proto"], theirs["scope"], theirs["type"]) == (0, 255, 0)
    fdb = parse_with_pyroute2(ndmsg, nb.fdb_delete(3, "66:00:00:00:00:01", "10.0.0.2").encode(1))
    assert fdb["header"]["type"] == nb.RTM_DELNEIGH and fdb["flags"] == nb.NTF_SELF


def test_attribute_parser_stops_at_truncated_or_bogus_lengths():
    good = nb._attr(1, b"\x0a\x00\x00\x01")
    assert nb.parse_attrs(good + b"\x02\x00", 0) == {1: b"\x0a\x00\x00\x01"}  # short tail
    assert nb.parse_attrs(b"\x02\x00\x01\x00" + good, 0) == {}  # length < header: stop
    assert nb.ip_text(bytes(16)) == "::"


ifnames = st.text(
    st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="/:"),
    min_size=1,
    max_size=15,
)


@settings(max_examples=200, deadline=None)
@given(
    ifnames,
    st.integers(1, 2**31 - 1),
    st.integers(0, 2**32 - 1),
    st.one_of(st.none(), st.integers(0, 2**32 - 1)),
    st.booleans(),
)
def test_link_decodes_as_pyroute2_encodes_it(name, index, flags, mtu, extra):
    """``decode_link`` reads what pyroute2's ifinfmsg writes (name, index, flags, MTU, with
    other attributes around them), and a missing MTU reads as 0 (pyroute2's ``or 0``)."""
    from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg

    msg = ifinfmsg()
    msg["family"], msg["index"], msg["flags"], msg["change"] = 0, index, flags, 0
    attrs = [("IFLA_IFNAME", name)]
    if extra:
        attrs.insert(0, ("IFLA_TXQLEN", 1000))
        attrs.append(("IFLA_GROUP", 6))
    if mtu is not None:
        attrs.append(("IFLA_MTU", mtu))
    msg["attrs"] = attrs
    msg.encode()
    wire = bytes(msg.data)
    got = nb.decode_link(wire[16:])  # the body after the nlmsghdr, as BatchWriter.dump gives it
    theirs = parse_with_pyroute2(ifinfmsg, wire)
    assert got == nb.Link(index, flags, name, mtu or 0)
    assert (got.name, got.index, got.flags, got.mtu) == (
        theirs.get_attr("IFLA_IFNAME"),
        theirs["index"],
        theirs["flags"],
        theirs.get_attr("IFLA_MTU") or 0,
    )


def test_link_dump_request_is_an_unspec_ifinfomsg_dump():
    req = nb.link_dump_request()
    wire = req.encode(9)
    from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg

    theirs = parse_with_pyroute2(ifinfmsg, wire)
    assert theirs["header"]["type"] == nb.RTM_GETLINK
    assert theirs["header"]["flags"] & nb.NLM_F_DUMP == nb.NLM_F_DUMP
    assert (theirs["family"], theirs["index"], theirs["flags"]) == (0, 0, 0)
    assert len(wire) == 16 + 16


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 2**31 - 1),
    st.sampled_from(["clsact", "ingress", "noqueue", "fq_codel", "pfifo_fast"]),
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**32 - 1),
)
def test_qdisc_decodes_as_pyroute2_encodes_it(index, kind, handle, parent):
    from pyroute2.netlink.rtnl.tcmsg import tcmsg

    msg = tcmsg()
    msg["family"], msg["index"], msg["handle"], msg["parent"], msg["info"] = (
        0,
        index,
        handle,
        parent,
        0,
    )
    msg["attrs"] = [("TCA_KIND", kind)]
    msg.encode()
    wire = bytes(msg.data)
    theirs = parse_with_pyroute2(tcmsg, wire)
    assert (
        nb.decode_qdisc(wire[16:])
        == (index, kind)
        == (theirs["index"], theirs.get_attr("TCA_KIND"))
    )


def test_qdisc_dump_request_is_an_all_links_tcmsg_dump():
    from pyroute2.netlink.rtnl.tcmsg import tcmsg

    wire = nb.qdisc_dump_request().encode(3)
    theirs = parse_with_pyroute2(tcmsg, wire)
    assert theirs["header"]["type"] == nb.RTM_GETQDISC
    assert theirs["header"]["flags"] & nb.NLM_F_DUMP == nb.NLM_F_DUMP
    assert (theirs["family"], theirs["index"], theirs["parent"]) == (0, 0, 0)
    assert len(wire) == 16 + 20
