"""Which device traffic between two nodes crosses (``calico.policyeval.tunnels``) and what that
does to host endpoint forward chains: the pool's encapsulation (VXLAN v4/v6, IPIP, Never,
CrossSubnet with the nodes in the same subnet or not) decided exactly as Felix's route
resolver and VXLAN route model decide it (cross-checked against them), then a named uplink
endpoint's forward chains skipped on a tunnel device and a ``*`` endpoint's applied."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from calico.felix.calc.l3_route_resolver import Entry, compute_route, node_info, pool_info, to_cidr
from calico.felix.dataplane.vxlan_model import VTEP, Settings, route_for
from calico.felix.messages import IPPoolType
from calico.model import ResourceKey
from calico.model import processors as p
from calico.model.v3_resources import decode_resource
from calico.policyeval.hostendpoints import CrossingUnknown
from calico.policyeval.report import HostAddress
from calico.policyeval.tunnels import Routing
from tests.unit.policyeval.test_policyeval_forwarding import dataset, explain, fwd, gnp, hep, tcp
from tests.unit.policyeval.test_policyeval_forwarding import wep as wep4

V4_POOL, V6_POOL = "10.244.0.0/16", "fd00:244::/48"
WL1, WL2, WL1_6, WL2_6 = "10.244.1.5", "10.244.2.6", "fd00:244:0:1::5", "fd00:244:0:2::6"


def pool(name: str, cidr: str, vxlan: str = "Never", ipip: str = "Never") -> dict[str, Any]:
    spec = {"cidr": cidr, "vxlanMode": vxlan, "ipipMode": ipip}
    return {"apiVersion": "projectcalico.org/v3", "kind": "IPPool",
            "metadata": {"name": name}, "spec": spec}  # fmt: skip


def node(name: str, v4: str | None = None, v6: str | None = None, addrs=()) -> dict[str, Any]:
    bgp = {k: v for k, v in (("ipv4Address", v4), ("ipv6Address", v6)) if v}
    spec: dict[str, Any] = {"bgp": bgp} if bgp else {}
    if addrs:
        spec["addresses"] = [{"address": a, "type": t} for a, t in addrs]
    return {"apiVersion": "projectcalico.org/v3", "kind": "Node",
            "metadata": {"name": name}, "spec": spec}  # fmt: skip


NODES_SAME = [node("node1", "192.168.0.1/24", "fd00:1::1/64"),
              node("node2", "192.168.0.2/24", "fd00:1::2/64")]  # fmt: skip
NODES_APART = [node("node1", "192.168.0.1/24", "fd00:1::1/64"),
               node("node2", "192.168.1.2/24", "fd00:2::2/64")]  # fmt: skip


def wep(name: str, ip: str, node_name: str) -> dict[str, Any]:
    doc = wep4(name, ip, node_name)
    doc["spec"]["ipNetworks"] = [f"{ip}/{128 if ':' in ip else 32}"]
    return doc


def routing(pools: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> Routing:
    out = Routing()
    for doc in pools:
        out.add_pool(doc["metadata"]["name"], doc)
    for doc in nodes:
        out.add_node(doc["metadata"]["name"], doc)
    return out


# (pool modes, nodes, destination) -> device node1's route to node2's workload uses
CASES = [
    ({"vxlan": "Always"}, NODES_SAME, WL2, "vxlan.calico"),
    ({"vxlan": "Always"}, NODES_APART, WL2, "vxlan.calico"),
    ({"vxlan": "CrossSubnet"}, NODES_SAME, WL2, None),
    ({"vxlan": "CrossSubnet"}, NODES_APART, WL2, "vxlan.calico"),
    ({"vxlan": "Never"}, NODES_APART, WL2, None),
    ({"vxlan": "Always"}, NODES_SAME, WL2_6, "vxlan-v6.calico"),
    ({"vxlan": "CrossSubnet"}, NODES_SAME, WL2_6, None),
    ({"vxlan": "CrossSubnet"}, NODES_APART, WL2_6, "vxlan-v6.calico"),
    ({"vxlan": "Never"}, NODES_SAME, WL2_6, None),
    ({"ipip": "Always"}, NODES_SAME, WL2, "tunl0"),
    ({"ipip": "CrossSubnet"}, NODES_SAME, WL2, None),
    ({"ipip": "CrossSubnet"}, NODES_APART, WL2, "tunl0"),
    ({"ipip": "Never"}, NODES_SAME, WL2, None),
]


def _pools_for(modes: dict[str, str]) -> list[dict[str, Any]]:
    return [pool("p4", V4_POOL, **modes), pool("p6", V6_POOL, vxlan=modes.get("vxlan", "Never"))]


@pytest.mark.parametrize(("modes", "nodes", "dst", "device"), CASES)
def test_device_by_encapsulation_and_subnet(modes, nodes, dst, device) -> None:
    found = routing(_pools_for(modes), nodes).crossing("node1", "node2", ipaddress.ip_address(dst))
    assert found.device == device
    cross = "CrossSubnet" in modes.values()
    assert ("subnet" in found.reason) is cross
    assert ("the uplink" in found.reason) is (device is None)


@pytest.mark.parametrize(("modes", "nodes", "dst", "device"), CASES)
def test_agrees_with_felix_routes(modes, nodes, dst, device) -> None:
    """Felix's own route for the destination's block on node1: its pool type and same-subnet
    flag, and (VXLAN) the device its route model programs, give the same answer."""
    docs = _pools_for(modes)
    block = "10.244.2.0/26" if ":" not in dst else "fd00:244:0:2::/64"
    path = []
    for doc in docs:
        for value in p.process(ResourceKey("IPPool", doc["metadata"]["name"]), doc).values():
            if ipaddress.ip_address(dst) in ipaddress.ip_network(value.cidr):
                path.append(Entry(pool=pool_info(value)))
    path.append(Entry(blocks={to_cidr(block): ("node2", False)}))
    names = [n["metadata"]["name"] for n in nodes]
    infos = {
        k: node_info(decode_resource(ResourceKey("Node", k), n))
        for k, n in zip(names, nodes, strict=True)
    }
    route = compute_route(to_cidr(block), path, infos, "node1")
    if route.ip_pool_type is IPPoolType.VXLAN:
        version = ipaddress.ip_network(block).version
        vtep_ip = "10.244.2.0" if version == 4 else "fd00:244:0:2::"
        vtep = VTEP("node2", vtep_ip, "66:00:00:00:00:02", infos["node2"].ip_for(version))
        spec = route_for(Settings(version, "node1"), route, {"node2": vtep}, "eth0")
        assert spec is not None
        assert (None if spec.device == "eth0" else spec.device) == device
    elif route.ip_pool_type is IPPoolType.IPIP:
        assert (None if route.same_subnet else "tunl0") == device
    else:
        assert device is None


def test_subnet_boundary_and_asymmetry() -> None:
    """The sender's prefix decides: .255 of its /24 is in, the next address is not; a /32
    sender holds no one else while a /23 one holds a /32 peer."""
    pools = [pool("p4", V4_POOL, vxlan="CrossSubnet")]
    dst = ipaddress.ip_address(WL2)
    inside = routing(pools, [node("node1", "192.168.0.1/24"), node("node2", "192.168.0.255/24")])
    assert inside.crossing("node1", "node2", dst).device is None
    outside = routing(pools, [node("node1", "192.168.0.1/24"), node("node2", "192.168.1.0/24")])
    assert outside.crossing("node1", "node2", dst).device == "vxlan.calico"
    lopsided = routing(pools, [node("node1", "192.168.0.1/23"), node("node2", "192.168.1.9/32")])
    assert lopsided.crossing("node1", "node2", dst).device is None
    assert lopsided.crossing("node2", "node1", dst).device == "vxlan.calico"


def test_either_family_makes_same_subnet() -> None:
    """As Felix's resolver: a v6 route is direct when the nodes share only a v4 subnet."""
    nodes = [node("node1", "192.168.0.1/24", "fd00:1::1/64"),
             node("node2", "192.168.0.2/24", "fd00:2::2/64")]  # fmt: skip
    r = routing([pool("p6", V6_POOL, vxlan="CrossSubnet")], nodes)
    assert r.crossing("node1", "node2", ipaddress.ip_address(WL2_6)).device is None


def test_node_addresses_bgp_then_internal_then_external() -> None:
    pools = [pool("p4", V4_POOL, vxlan="CrossSubnet")]
    dst = ipaddress.ip_address(WL2)
    internal = [("10.9.0.1/16", "ExternalIP"), ("192.168.0.1/24", "InternalIP")]
    r = routing(pools, [node("node1", addrs=internal), node("node2", "192.168.0.2/24")])
    assert r.crossing("node1", "node2", dst).device is None  # InternalIP over ExternalIP
    external = [("10.9.0.1/16", "ExternalIP")]
    r = routing(pools, [node("node1", addrs=external), node("node2", "192.168.0.2/24")])
    assert r.crossing("node1", "node2", dst).device == "vxlan.calico"
    bgp = node("node1", "10.9.0.1/16", addrs=[("192.168.0.1/24", "InternalIP")])
    r = routing(pools, [bgp, node("node2", "192.168.0.2/24")])
    assert r.crossing("node1", "node2", dst).device == "vxlan.calico"  # BGP wins
    r = routing(pools, [node("node1", "192.168.0.1/24")])  # node2 unknown: not same subnet
    assert r.crossing("node1", "node2", dst).device == "vxlan.calico"


def test_pool_nesting_invalid_pools_and_no_pool() -> None:
    """The most specific pool's type with CrossSubnet from any containing pool; a pool
    Felix's syncer refuses (IPIP on IPv6, both encapsulations) is skipped."""
    nested = [pool("outer", "10.244.0.0/16", ipip="CrossSubnet"),
              pool("inner", "10.244.2.0/24", vxlan="Always")]  # fmt: skip
    r = routing(nested, NODES_SAME)
    assert r.crossing("node1", "node2", ipaddress.ip_address(WL2)).device is None
    assert r.crossing("node1", "node2", ipaddress.ip_address(WL1)).device is None
    r = routing(nested, NODES_APART)
    assert r.crossing("node1", "node2", ipaddress.ip_address(WL2)).device == "vxlan.calico"
    assert r.crossing("node1", "node2", ipaddress.ip_address(WL1)).device == "tunl0"
    bad = [pool("v6ipip", V6_POOL, ipip="Always"), pool("both", V4_POOL, "Always", "Always")]
    r = routing(bad, NODES_APART)
    assert r.pools == []
    found = r.crossing("node1", "node2", ipaddress.ip_address(WL2))
    assert found.device is None and "in no IP pool" in found.reason


# -- what the device does to host endpoint forward chains ------------------------------------

UP2 = hep("node2-eth0", "eth0", {"role": "up"}, node="node2")
WILD2 = hep("auto-node2", "*", {"role": "wild"}, node="node2")
UP1 = hep("node1-eth0", "eth0", {"role": "up"}, node="node1")
WILD1 = hep("auto-node1", "*", {"role": "wild"}, node="node1")
TUN2 = hep("node2-vxlan", "vxlan.calico", {"role": "tun"}, node="node2")


@pytest.mark.parametrize(
    ("modes", "nodes", "src", "dst", "device"),
    [(m, n, WL1 if d != WL2_6 else WL1_6, d, dev) for m, n, d, dev in CASES],
)
@pytest.mark.parametrize(("heps", "role"), [([UP2], "up"), ([UP2, WILD2], "wild")])
def test_ingress_at_the_receiving_node(modes, nodes, src, dst, device, heps, role) -> None:
    """node2's endpoint for the interface the packet arrives on: on a tunnel a named uplink's
    forward chain is not crossed, a ``*`` one's is (its deny decides)."""
    docs = [*heps, wep("a", src, "node1"), wep("b", dst, "node2"),
            fwd("f", role, "ingress", [tcp("Deny")])]  # fmt: skip
    report = explain(dataset(*docs), src, dst, routing=routing(_pools_for(modes), nodes))
    side = report["ingress"]
    crossing = side["chain"][0]
    assert crossing["step"] == "crossing"
    assert crossing.get("device") == device
    assert ("node node2 receives it on " + (device or "its uplink")) in crossing["note"]
    denied = (role == "up") is (device is None)  # a tunnel: `*` is crossed, not the uplink
    assert side["verdict"] == ("Deny" if denied else "Allow")
    if denied:
        shown = "hostendpoint node2-eth0" if device is None else "hostendpoint auto-node2"
        assert report["result"]["hostEndpoint"] == shown
        if device is not None:
            assert f"of node node2 ({device})" in side["chain"][1]["note"]


@pytest.mark.parametrize(("heps", "role"), [([UP1], "up"), ([UP1, WILD1], "wild")])
@pytest.mark.parametrize(("modes", "nodes", "device"), [
    ({"vxlan": "Always"}, NODES_SAME, "vxlan.calico"),
    ({"vxlan": "CrossSubnet"}, NODES_SAME, None),
    ({"ipip": "CrossSubnet"}, NODES_APART, "tunl0"),
])  # fmt: skip
def test_egress_at_the_sending_node(modes, nodes, device, heps, role) -> None:
    docs = [*heps, wep("a", WL1, "node1"), wep("b", WL2, "node2"),
            fwd("f", role, "egress", [tcp("Deny")])]  # fmt: skip
    report = explain(dataset(*docs), WL1, WL2, routing=routing(_pools_for(modes), nodes))
    side = report["egress"]
    crossing = next(s for s in side["chain"] if s["step"] == "crossing")
    assert crossing.get("device") == device
    assert "node node1 sends it out on" in crossing["note"]
    denied = (role == "up") is (device is None)
    assert side["verdict"] == ("Deny" if denied else "Allow")


def test_tunnel_named_endpoint_and_via_override() -> None:
    """An endpoint named for the tunnel device polices it; ``--via-interface`` overrides the
    routing decision (no crossing step then); without routing data, the uplink as before."""
    docs = [
        UP2,
        TUN2,
        wep("a", WL1, "node1"),
        wep("b", WL2, "node2"),
        fwd("f", "tun", "ingress", [tcp("Deny")]),
        fwd("g", "up", "ingress", [tcp("Deny")]),
    ]
    data = dataset(*docs)  # fmt: skip
    r = routing(_pools_for({"vxlan": "Always"}), NODES_SAME)
    report = explain(data, WL1, WL2, routing=r)
    assert report["result"]["hostEndpoint"] == "hostendpoint node2-vxlan"
    report = explain(data, WL1, WL2, routing=r, via="eth0")
    assert report["result"]["hostEndpoint"] == "hostendpoint node2-eth0"
    assert all(s["step"] != "crossing" for s in report["ingress"]["chain"])
    with pytest.raises(CrossingUnknown):  # no routing data: two named endpoints, as before
        explain(data, WL1, WL2)
    report = explain(dataset(*docs[:1], *docs[2:]), WL1, WL2)  # no routing, one uplink
    assert report["result"]["hostEndpoint"] == "hostendpoint node2-eth0"
    assert all(s["step"] != "crossing" for s in report["ingress"]["chain"])


def test_same_node_and_external_peers_consult_no_routing() -> None:
    r = routing(_pools_for({"vxlan": "Always"}), NODES_SAME)
    docs = [UP2, wep("a", "10.244.2.5", "node2"), wep("b", WL2, "node2")]
    report = explain(dataset(*docs), "10.244.2.5", WL2, routing=r)
    assert all(s["step"] != "crossing" for side in ("egress", "ingress")
               for s in report[side]["chain"])  # fmt: skip
    report = explain(dataset(*docs), "203.0.113.9", WL2, routing=r)
    assert all(s["step"] != "crossing" for s in report["ingress"]["chain"])


@pytest.mark.parametrize(("modes", "nodes", "device"), [
    ({"vxlan": "Always"}, NODES_SAME, "vxlan.calico"),
    ({"vxlan": "CrossSubnet"}, NODES_APART, "vxlan.calico"),
    ({"vxlan": "CrossSubnet"}, NODES_SAME, None),
])  # fmt: skip
def test_host_address_of_the_remote_node(modes, nodes, device) -> None:
    """A workload to node2's VXLAN tunnel address (in the pool): node2's INPUT runs on the
    device the packet arrives on, `*`'s policy on a tunnel, the named uplink's otherwise;
    the reverse (node2's host to the workload) leaves node2 by the same device."""
    tunnel_addr = "10.244.2.0"
    docs = [UP2, WILD2, wep("a", WL1, "node1"),
            gnp("h-wild", "role == 'wild'", "ingress", [tcp("Allow")]),
            gnp("h-up", "role == 'up'", "ingress", [tcp("Deny")])]  # fmt: skip
    data, r = dataset(*docs), routing(_pools_for(modes), nodes)
    host = HostAddress("node2", "spec.ipv4VXLANTunnelAddr")
    report = explain(data, WL1, tunnel_addr, routing=r, hosts=(None, host))
    side = report["ingress"]
    assert [s["step"] for s in side["chain"][:2]] == ["host-address", "crossing"]
    assert side["chain"][1].get("device") == device
    assert side["endpoint"] == ("hostendpoint node2-eth0" if device is None else
                                "hostendpoint auto-node2")  # fmt: skip
    assert side["verdict"] == ("Deny" if device is None else "Allow")
    report = explain(data, tunnel_addr, WL1, routing=r, hosts=(host, None))
    egress = report["egress"]
    assert egress["chain"][1]["step"] == "crossing"
    assert "node node2 sends it out on" in egress["chain"][1]["note"]
    assert egress["chain"][1].get("device") == device
    crossing = next(s for s in report["ingress"]["chain"] if s["step"] == "crossing")
    assert crossing.get("device") == device and "node node1 receives it on" in crossing["note"]
