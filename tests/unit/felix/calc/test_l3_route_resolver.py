"""L3RouteResolver: scenarios through the real processors, and a hypothesis differential test
against a recompute-everything reference model."""

from __future__ import annotations

import ipaddress
import json
from collections import defaultdict
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from recording_callbacks import RecordingCallbacks, feed

from calico.felix.calc.fanout import TypeFanout
from calico.felix.calc.l3_route_resolver import (
    Entry,
    L3RouteResolver,
    RefType,
    block_routes,
    cidr_str,
    compute_route,
    contains,
    node_info,
    pool_info,
    to_cidr,
    wep_cidrs,
)
from calico.felix.messages import IPPoolType, RouteType, RouteUpdate
from calico.model import BlockKey, IPPoolKey, ResourceKey, WorkloadEndpointKey
from calico.model.values import decode_value

L = RouteType


def block_yaml(cidr: str, host: str | None, allocs: dict[int, str]) -> str:
    """An IPAMBlock whose ordinal ``i`` is allocated by node ``allocs[i]``."""
    size = ipaddress.ip_network(cidr).num_addresses
    nodes = sorted(set(allocs.values()))
    spec: dict[str, Any] = {
        "cidr": cidr,
        "allocations": [nodes.index(allocs[i]) if i in allocs else None for i in range(size)],
        "unallocated": [i for i in range(size) if i not in allocs],
        "attributes": [{"handle_id": f"h-{n}", "secondary": {"node": n}} for n in nodes],
    }
    if host:
        spec["affinity"] = f"host:{host}"
    name = cidr.replace("/", "-").replace(".", "-")
    doc = {"apiVersion": "projectcalico.org/v3", "kind": "IPAMBlock", "metadata": {"name": name}}
    return json.dumps({**doc, "spec": spec})


POOL = """
apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {name: pool}
spec: {cidr: 10.0.0.0/16, vxlanMode: CrossSubnet, natOutgoing: true}
"""
NODES = """
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node1}
spec: {bgp: {ipv4Address: 192.168.0.1/24}, ipv4VXLANTunnelAddr: 10.0.1.0}
---
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node2}
spec: {bgp: {ipv4Address: 192.168.0.2/24}}
---
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node3}
spec: {addresses: [{address: 192.168.1.3/24, type: InternalIP}]}
"""
WEP = """
apiVersion: projectcalico.org/v3
kind: WorkloadEndpoint
metadata: {name: node1-k8s-pod1-eth0, namespace: default}
spec: {node: node1, orchestrator: k8s, pod: pod1, endpoint: eth0, interfaceName: cali1,
       ipNetworks: [10.0.1.5/32]}
"""
REMOTE_WEP = WEP.replace("node1", "node2").replace("10.0.1.5", "10.0.2.7")


def setup(route_source: str = "CalicoIPAM") -> tuple[TypeFanout, RecordingCallbacks]:
    rec = RecordingCallbacks()
    fanout = TypeFanout()
    L3RouteResolver(rec, "node1", route_source).register(fanout)
    return fanout, rec


def state_of(calls: list[tuple[Any, ...]], state: dict[str, RouteUpdate]) -> None:
    """Apply recorded route calls to ``state``; a remove must name a live route."""
    for name, arg in calls:
        if name == "on_route_update":
            state[arg.dst] = arg
        else:
            assert name == "on_route_remove"
            del state[arg]


def vx(dst: str, kind: RouteType, node: str = "", ip: str = "", **kw: Any) -> RouteUpdate:
    pool = {"ip_pool_type": IPPoolType.VXLAN, "nat_outgoing": True}
    return RouteUpdate(dst, frozenset({kind}), dst_node_name=node, dst_node_ip=ip, **pool, **kw)


def host(dst: str, kind: RouteType, node: str, ip: str) -> RouteUpdate:
    return RouteUpdate(dst, frozenset({kind}), dst_node_name=node, dst_node_ip=ip)


def test_cluster_scenario() -> None:
    fanout, rec = setup()
    feed(fanout, POOL + "---" + NODES)
    feed(fanout, block_yaml("10.0.1.0/26", "node1", {0: "node1", 5: "node1"}))
    feed(fanout, block_yaml("10.0.2.0/26", "node2", {0: "node2", 9: "node3"}))
    feed(fanout, WEP)
    feed(fanout, REMOTE_WEP)  # not local: ignored in CalicoIPAM mode
    state: dict[str, RouteUpdate] = {}
    state_of(rec.take(), state)
    assert state == {
        "10.0.0.0/16": vx("10.0.0.0/16", L.CIDR_INFO),
        "10.0.1.0/26": vx(
            "10.0.1.0/26", L.LOCAL_WORKLOAD, "node1", "192.168.0.1", same_subnet=True
        ),
        "10.0.1.0/32": vx(
            "10.0.1.0/32",
            L.LOCAL_TUNNEL,
            "node1",
            "192.168.0.1",
            same_subnet=True,
            tunnel_type="vxlan",
        ),
        "10.0.1.5/32": vx(
            "10.0.1.5/32",
            L.LOCAL_WORKLOAD,
            "node1",
            "192.168.0.1",
            same_subnet=True,
            local_workload=True,
        ),
        "10.0.2.0/26": vx(
            "10.0.2.0/26", L.REMOTE_WORKLOAD, "node2", "192.168.0.2", same_subnet=True
        ),
        "10.0.2.9/32": vx("10.0.2.9/32", L.REMOTE_WORKLOAD, "node3", "192.168.1.3", borrowed=True),
        "192.168.0.1/32": host("192.168.0.1/32", L.LOCAL_HOST, "node1", "192.168.0.1"),
        "192.168.0.2/32": host("192.168.0.2/32", L.REMOTE_HOST, "node2", "192.168.0.2"),
        "192.168.1.3/32": host("192.168.1.3/32", L.REMOTE_HOST, "node3", "192.168.1.3"),
    }


def test_incremental_changes() -> None:
    fanout, rec = setup()
    feed(fanout, POOL + "---" + NODES)
    feed(fanout, block_yaml("10.0.2.0/26", "node2", {0: "node2"}))
    rec.take()
    # node2 moves into another subnet: its routes lose same_subnet and change next hop.
    feed(fanout, NODES.split("---")[1].replace("192.168.0.2/24", "192.168.5.2/24"))
    assert rec.take() == [
        ("on_route_update", vx("10.0.2.0/26", L.REMOTE_WORKLOAD, "node2", "192.168.5.2")),
        ("on_route_remove", "192.168.0.2/32"),
        ("on_route_update", host("192.168.5.2/32", L.REMOTE_HOST, "node2", "192.168.5.2")),
    ]
    tunnel = RouteUpdate(
        "10.0.1.0/32",
        frozenset({L.LOCAL_TUNNEL}),
        dst_node_name="node1",
        dst_node_ip="192.168.0.1",
        tunnel_type="vxlan",
    )
    # Deleting the pool turns the block route into plain (no-pool) info.
    feed(fanout, POOL, delete=True)
    assert rec.take() == [
        ("on_route_remove", "10.0.0.0/16"),
        ("on_route_update", replace(tunnel, ip_pool_type=IPPoolType.NONE, nat_outgoing=False)),
        ("on_route_update", host("10.0.2.0/26", L.REMOTE_WORKLOAD, "node2", "192.168.5.2")),
    ]
    feed(fanout, block_yaml("10.0.2.0/26", "node2", {0: "node2"}), delete=True)
    assert rec.take() == [("on_route_remove", "10.0.2.0/26")]


def test_workload_ips_mode_uses_all_weps_and_ignores_blocks() -> None:
    fanout, rec = setup("WorkloadIPs")
    feed(fanout, NODES)
    feed(fanout, block_yaml("10.0.2.0/26", "node2", {0: "node2"}))
    feed(fanout, WEP + "---" + REMOTE_WEP)
    state: dict[str, RouteUpdate] = {}
    state_of(rec.take(), state)
    assert state["10.0.2.7/32"] == host("10.0.2.7/32", L.REMOTE_WORKLOAD, "node2", "192.168.0.2")
    assert state["10.0.1.5/32"].local_workload
    assert "10.0.2.0/26" not in state


# --- differential test against a recompute-everything model -------------------------------

ME = "n1"
NODE_NAMES = ("n1", "n2", "n3")


def reference(
    pools: dict[Any, Any],
    blocks: dict[Any, Any],
    nodes: dict[str, Any],
    weps: dict[Any, Any],
    route_source: str,
) -> dict[str, RouteUpdate]:
    """Build every entry from scratch, then each route from a brute-force containment scan."""
    entries: dict[Any, Entry] = defaultdict(Entry)
    for key, value in pools.items():
        entries[to_cidr(key.cidr)].pool = pool_info(value)
    if route_source == "CalicoIPAM":
        for key, value in blocks.items():
            for cidr, route in block_routes(value).items():
                entries[cidr].blocks[to_cidr(key.cidr)] = route
    infos = {n: i for n, v in nodes.items() if (i := node_info(v)) is not None}
    for name, info in infos.items():
        for cidr in info.hosts:
            entries[cidr].hosts[name] += 1
        for cidr, kind in info.tunnels:
            entries[cidr].refs[(name, kind)] += 1
    for key, value in weps.items():
        if route_source == "WorkloadIPs" or key.hostname == ME:
            for cidr in wep_cidrs(value):
                entries[cidr].refs[(key.hostname, RefType.WEP)] += 1
    routes = {}
    for cidr, entry in entries.items():
        if entry.is_route():
            path = sorted((c for c in entries if contains(c, cidr)), key=lambda c: c[2])
            routes[cidr_str(cidr)] = compute_route(cidr, [entries[c] for c in path], infos, ME)
    return routes


IPS = ("10.0.0.1", "10.0.0.2", "10.0.0.5", "10.0.1.1", "10.2.0.1", "fd00::1", "fd00::5")
pool_cidrs = st.sampled_from(["10.0.0.0/16", "10.0.0.0/24", "10.0.0.0/30", "fd00::/64"])
modes = st.sampled_from(["always", "cross-subnet", "never"])


@st.composite
def pool_op(draw: Any) -> tuple[Any, Any]:
    key = IPPoolKey(draw(pool_cidrs))
    if draw(st.booleans()):
        return key, None
    value = {"cidr": str(key.cidr), "ipip_mode": draw(modes), "vxlan_mode": draw(modes)}
    return key, {**value, "masquerade": draw(st.booleans())}


@st.composite
def block_op(draw: Any) -> tuple[Any, Any]:
    cidr = ipaddress.ip_network(
        draw(st.sampled_from(["10.0.0.0/30", "10.0.0.4/30", "10.0.0.5/32"]))
    )
    key = BlockKey(cidr)
    if draw(st.booleans()):
        return key, None
    host = draw(st.sampled_from(("", *NODE_NAMES)))
    allocs = [draw(st.sampled_from((None, 0, 1, 2))) for _ in range(cidr.num_addresses)]
    attrs = [{"handle_id": "h", "secondary": {"node": n}} for n in NODE_NAMES]
    value = {"cidr": str(cidr), "allocations": allocs, "attributes": attrs}
    return key, {**value, "affinity": f"host:{host}" if host else None}


@st.composite
def node_op(draw: Any) -> tuple[Any, Any]:
    name = draw(st.sampled_from(NODE_NAMES))
    key = ResourceKey("Node", name)
    if draw(st.booleans()):
        return key, None
    opt_ip = st.one_of(st.none(), st.sampled_from(IPS[:5]))
    spec: dict[str, Any] = {}
    if (ip := draw(opt_ip)) is not None:
        spec["bgp"] = {"ipv4Address": f"{ip}/{draw(st.sampled_from([24, 16]))}"}
        if (tun := draw(opt_ip)) is not None:
            spec["bgp"]["ipv4IPIPTunnelAddr"] = tun
    if draw(st.booleans()):
        spec["bgp"] = {**spec.get("bgp", {}), "ipv6Address": "fd00::1/64"}
    if (ip := draw(opt_ip)) is not None:
        spec["addresses"] = [{"address": ip, "type": "InternalIP"}]
    if (tun := draw(opt_ip)) is not None:
        spec["ipv4VXLANTunnelAddr"] = tun
    if (tun := draw(opt_ip)) is not None:
        spec["wireguard"] = {"interfaceIPv4Address": tun}
    return key, {"metadata": {"name": name}, "spec": spec}


@st.composite
def wep_op(draw: Any) -> tuple[Any, Any]:
    node = draw(st.sampled_from(NODE_NAMES[:2]))
    key = WorkloadEndpointKey(node, "k8s", f"default/pod{draw(st.integers(0, 2))}", "eth0")
    if draw(st.booleans()):
        return key, None
    ips = draw(st.lists(st.sampled_from(IPS), max_size=2, unique=True))
    v4 = [f"{i}/32" for i in ips if ":" not in i]
    v6 = [f"{i}/128" for i in ips if ":" in i]
    return key, {"state": "active", "name": "cali1", "ipv4_nets": v4 or None, "ipv6_nets": v6}


@settings(max_examples=150, deadline=None)
@given(
    route_source=st.sampled_from(["CalicoIPAM", "WorkloadIPs"]),
    ops=st.lists(st.one_of(pool_op(), block_op(), node_op(), wep_op()), max_size=25),
)
def test_incremental_matches_reference(route_source: str, ops: list[tuple[Any, Any]]) -> None:
    rec = RecordingCallbacks()
    fanout = TypeFanout()
    L3RouteResolver(rec, ME, route_source).register(fanout)
    tables: dict[type, dict[Any, Any]] = defaultdict(dict)
    state: dict[str, RouteUpdate] = {}
    for key, raw in ops:
        value = decode_value(key, raw)
        fanout.on_update(key, value)
        if value is None:
            tables[type(key)].pop(key, None)
        else:
            tables[type(key)][key] = value
        state_of(rec.take(), state)
        nodes = {k.name: v for k, v in tables[ResourceKey].items()}
        expected = reference(
            tables[IPPoolKey], tables[BlockKey], nodes, tables[WorkloadEndpointKey], route_source
        )
        assert state == expected
