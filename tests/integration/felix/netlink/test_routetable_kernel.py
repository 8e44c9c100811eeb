"""RouteTable + sysctls against a real kernel, inside throwaway network namespaces."""

from __future__ import annotations

import socket
from contextlib import ExitStack

import pytest
from nlns import NS, add_veth, add_workload, tcp_reachable

from calico.felix.dataplane.sysctls import configure_workload_iface
from calico.felix.routetable import RouteTable, RouteTarget

pytestmark = pytest.mark.root


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_table(host: NS, stack: ExitStack, **kw) -> RouteTable:
    rt = RouteTable(netns=host.name, **kw)
    stack.callback(rt.close)
    return rt


def test_routes_neighbours_and_proxy_arp_give_connectivity(host: NS, stack: ExitStack) -> None:
    wl = add_workload(stack, host, "calitest1", "10.65.0.1")
    assert not tcp_reachable(host, wl.ns, wl.ip, 8080, timeout=0.3)  # no route yet

    rt = make_table(host, stack)
    rt.set_routes("calitest1", [RouteTarget(wl.ip, wl.mac)])
    res = rt.apply()
    assert res.ok and res.pending_ifaces == set()
    assert host.call(configure_workload_iface, "calitest1") == []

    (route,) = [r for r in host.routes() if r["dst"] == "10.65.0.1/32"]
    assert route == {
        "dst": "10.65.0.1/32",
        "oif": host.index("calitest1"),
        "proto": 3,
        "scope": 253,
        "metric": 1024,
    }
    neigh = host.ipr.neigh("dump", family=socket.AF_INET, ifindex=host.index("calitest1"))
    assert [(n.get("dst"), n.get("lladdr")) for n in neigh if n["state"] == 0x80] == [
        ("10.65.0.1", wl.mac)
    ]
    assert tcp_reachable(host, wl.ns, wl.ip, 8081)


def test_sysctls_written_per_interface(host: NS) -> None:
    add_veth(host, "calisys1")
    add_veth(host, "calisys2", peer_if="peer2")

    def configure_and_read() -> dict[str, str]:
        assert configure_workload_iface("calisys1", ipv4=True, ipv6=True) == []
        out = {}
        for path in (
            "ipv4/conf/calisys1/proxy_arp",
            "ipv4/conf/calisys1/forwarding",
            "ipv4/conf/calisys1/route_localnet",
            "ipv4/neigh/calisys1/proxy_delay",
            "ipv4/conf/calisys1/rp_filter",
            "ipv4/conf/default/rp_filter",
            "ipv6/conf/calisys1/accept_ra",
            "ipv6/conf/calisys1/proxy_ndp",
            "ipv6/conf/calisys1/forwarding",
            "ipv4/conf/calisys2/proxy_arp",
        ):
            with open(f"/proc/sys/net/{path}") as f:
                out[path] = f.read().strip()
        return out

    got = host.call(configure_and_read)
    assert got["ipv4/conf/calisys1/proxy_arp"] == "1"
    assert got["ipv4/conf/calisys1/forwarding"] == "1"
    assert got["ipv4/conf/calisys1/route_localnet"] == "1"
    assert got["ipv4/neigh/calisys1/proxy_delay"] == "0"
    assert got["ipv4/conf/calisys1/rp_filter"] == got["ipv4/conf/default/rp_filter"]
    assert got["ipv6/conf/calisys1/accept_ra"] == "0"
    assert got["ipv6/conf/calisys1/proxy_ndp"] == "1"
    assert got["ipv6/conf/calisys1/forwarding"] == "1"
    assert got["ipv4/conf/calisys2/proxy_arp"] == "0"  # only the interface we configured
    # And an interface that doesn't exist yet yields retryable errors instead of raising.
    errors = host.call(configure_workload_iface, "calinope")
    assert any(e.path == "net/ipv4/conf/calinope/proxy_arp" for e in errors)


def test_stale_route_removed_only_after_grace_period(host: NS, stack: ExitStack) -> None:
    add_veth(host, "calistale")
    add_veth(host, "ethkeep", peer_if="peerkeep")
    host.ip("route", "add", "10.65.1.9/32", "dev", "calistale", "scope", "link")
    host.ip("route", "add", "10.65.1.10/32", "dev", "ethkeep", "scope", "link")
    clock = Clock()
    rt = make_table(host, stack, clock=clock, grace_period=10.0)
    rt.set_routes("calistale", [RouteTarget("10.65.1.1")])
    rt.apply()
    assert host.routes_on("calistale") == {"10.65.1.1/32", "10.65.1.9/32"}
    clock.now += 9.5
    rt.apply()
    assert "10.65.1.9/32" in host.routes_on("calistale")
    clock.now += 0.5
    res = rt.apply()
    assert host.routes_on("calistale") == {"10.65.1.1/32"}
    assert res.removed_ips == {"10.65.1.9"}
    assert host.routes_on("ethkeep") == {"10.65.1.10/32"}  # not an owned prefix: untouched


def test_drift_repaired_on_resync(host: NS, stack: ExitStack) -> None:
    add_veth(host, "calidrift")
    clock = Clock()
    rt = make_table(host, stack, clock=clock, refresh_interval=90.0)
    rt.set_routes("calidrift", [RouteTarget("10.65.2.1"), RouteTarget("10.65.2.2")])
    rt.apply()
    host.ip("route", "del", "10.65.2.1/32", "dev", "calidrift")
    host.ip("route", "replace", "10.65.2.2/32", "dev", "calidrift", "metric", "1024", "proto", "4")
    deadline = rt.next_deadline()
    assert deadline is not None
    clock.now = deadline
    assert rt.apply().resynced
    got = [r for r in host.routes() if r["dst"].startswith("10.65.2.")]
    assert sorted((r["dst"], r["proto"], r["metric"]) for r in got) == [
        ("10.65.2.1/32", 3, 1024),
        ("10.65.2.2/32", 3, 1024),
    ]


def test_interface_appearing_later(host: NS, stack: ExitStack) -> None:
    rt = make_table(host, stack)
    rt.set_routes("calilate", [RouteTarget("10.65.3.1")])
    res = rt.apply()
    assert res.ok and res.pending_ifaces == {"calilate"}
    add_veth(host, "calilate")
    res = rt.apply()
    assert res.ok and res.pending_ifaces == set()
    assert host.routes_on("calilate") == {"10.65.3.1/32"}


def test_ip_moving_between_interfaces_is_reported(host: NS, stack: ExitStack) -> None:
    add_veth(host, "calimove1")
    add_veth(host, "calimove2", peer_if="peer2")
    rt = make_table(host, stack)
    rt.set_routes("calimove1", [RouteTarget("10.65.4.1")])
    rt.apply()
    rt.remove_iface("calimove1")
    rt.set_routes("calimove2", [RouteTarget("10.65.4.1")])
    res = rt.apply()
    assert res.moved_ips == {"10.65.4.1"}
    assert host.routes_on("calimove2") == {"10.65.4.1/32"}
    assert host.routes_on("calimove1") == set()


def test_ipv6_host_routes_and_neighbours(host: NS, stack: ExitStack) -> None:
    add_veth(host, "calisix")
    rt = make_table(host, stack)
    rt.set_routes(
        "calisix", [RouteTarget("fd00:65::1", "aa:bb:cc:00:00:01"), RouteTarget("10.65.5.1")]
    )
    assert rt.apply().ok
    idx = host.index("calisix")
    v6 = [r for r in host.routes(socket.AF_INET6) if r["oif"] == idx and r["proto"] != 2]
    assert v6 == [{"dst": "fd00:65::1/128", "oif": idx, "proto": 3, "scope": 0, "metric": 1024}]
    neigh = host.ipr.neigh("dump", family=socket.AF_INET6, ifindex=idx)
    assert [(n.get("dst"), n.get("lladdr"), n["state"]) for n in neigh if n["state"] == 0x80] == [
        ("fd00:65::1", "aa:bb:cc:00:00:01", 0x80)
    ]
    rt.set_routes("calisix", [RouteTarget("10.65.5.1")])
    rt.apply()
    neigh = host.ipr.neigh("dump", family=socket.AF_INET6, ifindex=idx)
    assert [n for n in neigh if n["state"] == 0x80] == []
