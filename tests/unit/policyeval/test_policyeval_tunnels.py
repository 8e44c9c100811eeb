"""Which device traffic between two nodes crosses (``calico.policyeval.tunnels``) and what that
does to host endpoint forward chains: the pool's encapsulation (VXLAN v4/v6, IPIP, Never,
CrossSubnet with the nodes in the same subnet or not) decided exactly as Felix's route
resolver and VXLAN route model decide it (cross-checked against them), then a named uplink
endpoint's forward chains skipped on a tunnel device and a ``*`` endpoint's applied."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.calc.l3_route_resolver import Entry, compute_route, node_info, pool_info, to_cidr
from calico.felix.calc.vxlan_resolver import VXLANResolver
from calico.felix.dataplane.vxlan_model import Settings, parse_vtep, route_for
from calico.felix.messages import IPPoolType
from calico.model import HostConfigKey, ResourceKey
from calico.model import processors as p
from calico.policyeval.hostendpoints import CrossingUnknown
from calico.policyeval.report import HostAddress
from calico.policyeval.tunnels import Routing
from tests.unit.policyeval.test_policyeval_forwarding import dataset, explain, fwd, gnp, hep, tcp
from tests.unit.policyeval.test_policyeval_forwarding import wep as wep4

V4_POOL, V6_POOL = "10.244.0.0/16", "fd00:244::/48"
WL1, WL2, WL1_6, WL2_6 = "10.244.1.5", "10.244.2.6", "fd00:244:0:1::5", "fd00:244:0:2::6"


T1 = ("10.244.1.0", "fd00:244:0:1::")
T2 = ("10.244.2.0", "fd00:244:0:2::")


def pool(name: str, cidr: str, vxlan: str = "Never", ipip: str = "Never") -> dict[str, Any]:
    spec = {"cidr": cidr, "vxlanMode": vxlan, "ipipMode": ipip}
    return {"apiVersion": "projectcalico.org/v3", "kind": "IPPool",
            "metadata": {"name": name}, "spec": spec}  # fmt: skip


def node(
    name: str, v4: str | None = None, v6: str | None = None, addrs=(), tunnels=None
) -> dict[str, Any]:
    """A Node; ``tunnels``: its (v4, v6) VXLAN tunnel addresses, by default node1's T1 and
    node2's T2."""
    if tunnels is None:
        tunnels = {"node1": T1, "node2": T2}.get(name, (None, None))
    bgp = {k: v for k, v in (("ipv4Address", v4), ("ipv6Address", v6)) if v}
    spec: dict[str, Any] = {"bgp": bgp} if bgp else {}
    for key, value in zip(("ipv4VXLANTunnelAddr", "ipv6VXLANTunnelAddr"), tunnels, strict=True):
        if value:
            spec[key] = value
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


class _VTEPs:
    """Callbacks collecting the VXLAN resolver's VTEPs."""

    def __init__(self) -> None:
        self.by_node: dict[str, Any] = {}

    def on_vtep_update(self, msg: Any) -> None:
        self.by_node[msg.node] = msg

    def on_vtep_remove(self, node_name: str) -> None:
        self.by_node.pop(node_name, None)


def felix_device(pools: list[dict], nodes: list[dict], dst: str, block: str) -> str | None:
    """The device node1's Felix routes node2's ``block`` (holding ``dst``) by: its route
    resolver's route, its VXLAN resolver's VTEPs and (VXLAN) its route model's kernel route
    (None: the uplink, or no route so the default route's); IPIP: via the peer's node IP on
    ``tunl0`` unless same subnet, none without that IP (upstream's IPIP manager)."""
    path = []
    for doc in pools:
        try:
            converted = p.process(ResourceKey("IPPool", doc["metadata"]["name"]), doc)
        except ValueError:  # the syncer drops a pool its processor refuses
            continue
        for value in converted.values():
            if ipaddress.ip_address(dst) in ipaddress.ip_network(value.cidr):
                path.append(Entry(pool=pool_info(value)))
    path.append(Entry(blocks={to_cidr(block): ("node2", False)}))
    infos, vteps = {}, _VTEPs()
    resolver = VXLANResolver(vteps, "node1")  # type: ignore[arg-type]
    for doc in nodes:
        name = doc["metadata"]["name"]
        for key, value in p.process(ResourceKey("Node", name), doc).items():
            if isinstance(key, HostConfigKey):
                resolver.on_host_config(key, value)
            else:
                resolver.on_resource(key, value)
                if (info := node_info(value)) is not None:
                    infos[name] = info
    route = compute_route(to_cidr(block), path, infos, "node1")
    version = ipaddress.ip_network(block).version
    if route.ip_pool_type is IPPoolType.VXLAN:
        remotes = {}
        if (msg := vteps.by_node.get("node2")) is not None:
            vtep = parse_vtep(msg, version)
            if vtep is not None:
                remotes["node2"] = vtep
        spec = route_for(Settings(version, "node1"), route, remotes, "eth0")
        return None if spec is None or spec.device == "eth0" else spec.device
    if route.ip_pool_type is IPPoolType.IPIP:
        return None if route.same_subnet or not route.dst_node_ip else "tunl0"
    return None


def _block(dst: str) -> str:
    return str(ipaddress.ip_network(f"{dst}/{64 if ':' in dst else 26}", strict=False))


@pytest.mark.parametrize(("modes", "nodes", "dst", "device"), CASES)
def test_agrees_with_felix_routes(modes, nodes, dst, device) -> None:
    assert felix_device(_pools_for(modes), nodes, dst, _block(dst)) == device


_MODES = st.sampled_from(["Always", "CrossSubnet", "Never"])
_V4 = st.builds(lambda a, n: f"192.168.{a // 256}.{a % 256}/{n}", st.integers(0, 1023),
                st.sampled_from([22, 23, 24, 25, 32]))  # fmt: skip
_V6 = st.builds(lambda a, n: f"fd00:{a}::{a + 1}/{n}", st.integers(0, 3), st.sampled_from([
    15, 16, 64, 128]))  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    vxlan=_MODES, ipip=_MODES, v6=st.booleans(),
    addrs=st.lists(st.tuples(st.none() | _V4, st.none() | _V6), min_size=2, max_size=2),
    tunnels=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=2, max_size=2),
    internal=st.booleans(),
)  # fmt: skip
def test_agrees_with_felix_on_any_nodes(vxlan, ipip, v6, addrs, tunnels, internal) -> None:
    """Any encapsulation modes, node addresses (BGP or InternalIP, either family or none,
    prefixes around the boundary) and VTEP halves: the same device as Felix's own code."""
    pools = [pool("p4", V4_POOL, vxlan=vxlan, ipip=ipip), pool("p6", V6_POOL, vxlan=vxlan)]
    docs = []
    for i, ((a4, a6), (t4, t6)) in enumerate(zip(addrs, tunnels, strict=True)):
        tun = (T1, T2)[i]
        tun_addrs = (tun[0] if t4 else None, tun[1] if t6 else None)
        if internal and i == 1:
            listed = [(a, "InternalIP") for a in (a4, a6) if a]
            docs.append(node(f"node{i + 1}", addrs=listed, tunnels=tun_addrs))
        else:
            docs.append(node(f"node{i + 1}", a4, a6, tunnels=tun_addrs))
    dst = WL2_6 if v6 else WL2
    ours = routing(pools, docs).crossing("node1", "node2", ipaddress.ip_address(dst))
    assert ours.device == felix_device(pools, docs, dst, _block(dst))


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


def test_no_route_without_the_receivers_vtep_or_address() -> None:
    """No VXLAN route without node2's VTEP of the family (node and tunnel address), no IPIP
    route without its IPv4 address: the default route's uplink, said so."""
    dst4, dst6 = ipaddress.ip_address(WL2), ipaddress.ip_address(WL2_6)
    half = [node("node1", "192.168.0.1/24"), node("node2", "192.168.1.2/24", "fd00:2::2/64",
                                                   tunnels=(None, T2[1]))]  # fmt: skip
    r = routing(_pools_for({"vxlan": "Always"}), half)
    found = r.crossing("node1", "node2", dst4)
    assert found.device is None and "no IPv4 VXLAN tunnel endpoint" in found.reason
    assert r.crossing("node1", "node2", dst6).device == "vxlan-v6.calico"
    v6_only = [node("node1", "192.168.0.1/24"), node("node2", v6="fd00:2::2/64")]
    found = routing(_pools_for({"ipip": "Always"}), v6_only).crossing("node1", "node2", dst4)
    assert found.device is None and "no IPv4 address" in found.reason
    assert felix_device(_pools_for({"ipip": "Always"}), v6_only, WL2, _block(WL2)) is None


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
    r = routing(pools, [node("node1", "192.168.0.1/24")])  # node2 unknown: no VTEP, no route
    found = r.crossing("node1", "node2", dst)
    assert found.device is None and "Felix routes none" in found.reason


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
        if device is not None:  # one parenthesis: the chain's
            assert side["chain"][1]["note"] == (
                f"forwarded in through hostendpoint auto-node2 of node node2 on {device} "
                "(cali-fhfw-)"
            )


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
    # Routed over the uplink (same subnet): the tunnel's endpoint is no uplink candidate.
    direct = routing(_pools_for({"vxlan": "CrossSubnet"}), NODES_SAME)
    report = explain(data, WL1, WL2, routing=direct)
    assert report["result"]["hostEndpoint"] == "hostendpoint node2-eth0"
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
