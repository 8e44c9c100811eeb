"""The route table's resync dumps, struct-decoded (``calico.felix.nlbatch``), against pyroute2's
``route("dump", family=..., table=254)`` through ``_kernel_route`` (the previous reader) and
its link dump: the same routes and links, in the same order, for every kind of route a node
has (kernel, static, ours, blackhole, multipath, other tables, metrics, IPv6, default)."""

from __future__ import annotations

import socket

import pytest
from nlns import NS, add_veth

from calico.felix.routetable.model import LinkInfo
from calico.felix.routetable.netlink import (
    IFF_UP,
    PyRoute2Netlink,
    RouteNetlinkError,
    _kernel_route,
)

pytestmark = pytest.mark.root


def pyroute2_routes(host: NS, version: int) -> list:
    family = socket.AF_INET if version == 4 else socket.AF_INET6
    msgs = host.ipr.route("dump", family=family, table=254)
    return [r for r in map(_kernel_route, msgs) if r is not None]


def pyroute2_links(host: NS) -> list[LinkInfo]:
    return [
        LinkInfo(
            m.get("ifname") or m.get_attr("IFLA_IFNAME"), m["index"], bool(m["flags"] & IFF_UP)
        )
        for m in host.ipr.link("dump")
    ]


def test_dumps_equal_pyroute2s(host: NS) -> None:
    add_veth(host, "cali1", None, "peer1")
    add_veth(host, "cali2", None, "peer2")
    host.ip("link", "add", "down0", "type", "veth", "peer", "name", "down1")  # admin down
    host.ip("addr", "add", "10.70.0.1/24", "dev", "cali1")  # kernel-proto subnet route
    host.ip("-6", "addr", "add", "fd00:70::1/64", "dev", "cali1", "nodad")
    for args in (
        ("10.65.0.1/32", "dev", "cali1", "proto", "80", "scope", "link"),
        ("10.65.0.2/32", "dev", "cali2", "metric", "7"),
        ("10.65.1.0/26", "dev", "cali2", "proto", "static"),
        ("blackhole", "10.65.2.0/26", "proto", "80"),
        ("10.65.3.0/24", "nexthop", "dev", "cali1", "nexthop", "dev", "cali2"),
        ("10.65.4.0/24", "dev", "cali1", "table", "100"),
        ("10.65.5.0/24", "dev", "cali1", "table", "300"),
        ("10.66.0.0/16", "via", "10.70.0.9", "dev", "cali1"),
    ):
        host.ip("route", "add", *args)
    for args in (
        ("fd00:65::1/128", "dev", "cali1", "proto", "80"),
        ("fd00:65::2/128", "dev", "cali2", "metric", "2048"),
        ("fd00:65:1::/64", "dev", "cali2", "table", "300"),
        ("default", "dev", "cali2"),
    ):
        host.ip("-6", "route", "add", *args)
    nl = PyRoute2Netlink(host.name)
    try:
        for version in (4, 6):
            got = nl.list_routes(version)
            assert got == pyroute2_routes(host, version)
        v4 = {r.cidr: r for r in nl.list_routes(4)}
        assert v4["10.65.0.1/32"].proto == 80 and v4["10.65.0.1/32"].scope == 253
        assert v4["10.65.0.2/32"].metric == 7
        assert "10.70.0.0/24" not in v4  # kernel protocol
        assert "10.65.2.0/26" not in v4 and "10.65.3.0/24" not in v4  # blackhole, multipath
        assert "10.65.4.0/24" not in v4 and "10.65.5.0/24" not in v4  # other tables
        assert v4["0.0.0.0/0"].ifindex == host.index("lo")  # the fixture's default route
        v6 = {r.cidr: r for r in nl.list_routes(6)}
        assert v6["fd00:65::1/128"].proto == 80 and v6["fd00:65::2/128"].metric == 2048
        assert v6["::/0"].ifindex == host.index("cali2")
        assert "fd00:65:1::/64" not in v6
        assert nl.list_links() == pyroute2_links(host)
        by_name = {link.name: link.admin_up for link in nl.list_links()}
        assert by_name["cali1"] is True and by_name["down0"] is False
    finally:
        nl.close()


def test_a_missing_namespace_fails_as_opening_pyroute2s_socket_did() -> None:
    """Failing to open the socket is not a request error (RouteTable does not retry it)."""
    from netns_support import unique_name

    nl = PyRoute2Netlink(unique_name("gone"))
    try:
        for call in (nl.list_links, lambda: nl.list_routes(4), lambda: nl.lookup_link("x")):
            with pytest.raises(OSError) as info:
                call()
            assert not isinstance(info.value, RouteNetlinkError)
    finally:
        nl.close()
