"""L3RouteResolver: a longest-prefix-match map of the cluster's address space for the
dataplane (VXLAN/WireGuard/no-encap routes, BPF's "what is this IP" lookups).

Sources, each contributing facts to exact CIDRs: IP pools (encap type, NAT, cross-subnet),
IPAM blocks (block -> affine node; IPs borrowed from another node's block -> that node),
node addresses (host routes), node tunnel addresses (tunnel routes) and workload IPs. A CIDR's
route combines the facts of every CIDR containing it, most specific last, plus facts about
its destination node (IP, same subnet as us). Only CIDRs with their own facts are routes.

The pure pieces (``pool_info``, ``node_info``, ``block_routes``, ``compute_route``) are shared
with the recompute-everything reference model the tests use as an oracle; the class adds the
incremental bookkeeping (which CIDRs a change can affect) that the oracle checks.
"""

from __future__ import annotations

import ipaddress
from bisect import bisect_left, bisect_right, insort
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from calico.felix.calc.callbacks import PipelineCallbacks
from calico.felix.calc.fanout import TypeFanout
from calico.felix.messages import IPPoolType, RouteType, RouteUpdate
from calico.model import BlockKey, IPPoolKey, ResourceKey, WorkloadEndpointKey
from calico.model import values as v1
from calico.model.node_addresses import node_addresses

if TYPE_CHECKING:  # an annotation only: a lean Node read's value (leannode) reads the same
    from calico.api.cluster import Node

#: (IP version, network address as int, prefix length): cheap to mask, hash and sort.
Cidr = tuple[int, int, int]
ROUTE_SOURCES = ("CalicoIPAM", "WorkloadIPs")
_BITS = {4: 32, 6: 128}
_OFF = ("", "never")


class RefType(IntEnum):
    """Per-CIDR references; the order breaks ties (workloads before tunnels)."""

    WEP = 0
    WIREGUARD = 1
    IPIP = 2
    VXLAN = 3


def to_cidr(text: Any) -> Cidr:
    net = ipaddress.ip_network(text, strict=False)
    return (net.version, int(net.network_address), net.prefixlen)


def cidr_str(cidr: Cidr) -> str:
    version, addr, plen = cidr
    cls = ipaddress.IPv4Network if version == 4 else ipaddress.IPv6Network
    return str(cls((addr, plen)))


def _supernet(cidr: Cidr, plen: int) -> Cidr:
    version, addr, _ = cidr
    bits = _BITS[version]
    mask = ((1 << bits) - 1) ^ ((1 << (bits - plen)) - 1)
    return (version, addr & mask, plen)


def contains(outer: Cidr, inner: Cidr) -> bool:
    return outer[0] == inner[0] and outer[2] <= inner[2] and _supernet(inner, outer[2]) == outer


# --- decoding the inputs ------------------------------------------------------------------


@dataclass(frozen=True)
class PoolInfo:
    type: IPPoolType
    nat_outgoing: bool
    cross_subnet: bool


def pool_info(value: v1.IPPool) -> PoolInfo:
    """VXLAN wins over IPIP when a pool (wrongly) has both; no encap -> NO_ENCAP."""
    ipip, vxlan = value.ipip_mode, value.vxlan_mode
    if vxlan not in _OFF:
        kind = IPPoolType.VXLAN
    elif ipip not in _OFF:
        kind = IPPoolType.IPIP
    else:
        kind = IPPoolType.NO_ENCAP
    cross = "cross-subnet" in (ipip, vxlan)
    return PoolInfo(kind, value.masquerade, cross)


@dataclass(frozen=True)
class NodeInfo:
    """What routes need from a Node: its addresses (with subnet) and its own CIDRs."""

    v4: ipaddress.IPv4Interface | None
    v6: ipaddress.IPv6Interface | None
    hosts: frozenset[Cidr]
    tunnels: frozenset[tuple[Cidr, RefType]]

    def ip_for(self, version: int) -> str:
        iface = self.v4 if version == 4 else self.v6
        return str(iface.ip) if iface else ""


def _opt_cidr(value: str | None) -> Cidr | None:
    if not value:
        return None
    try:
        return to_cidr(ipaddress.ip_interface(value).ip)
    except ValueError:
        return None


def node_info(node: Node) -> NodeInfo | None:
    """None for a node without any usable address (it then contributes nothing)."""
    addrs = node_addresses(node)
    if addrs.v4 is None and addrs.v6 is None:
        return None
    hosts = {to_cidr(a.ip) for a in (addrs.v4, addrs.v6) if a is not None}
    hosts.update(to_cidr(ip) for ip in addrs.others)
    spec, bgp, wg = node.spec, node.spec.bgp, node.spec.wireguard
    tunnels = {
        (cidr, kind)
        for text, kind in (
            (bgp.ipv4_ipip_tunnel_addr if bgp else None, RefType.IPIP),
            (spec.ipv4_vxlan_tunnel_addr, RefType.VXLAN),
            (spec.ipv6_vxlan_tunnel_addr, RefType.VXLAN),
            (wg.interface_ipv4_address if wg else None, RefType.WIREGUARD),
            (wg.interface_ipv6_address if wg else None, RefType.WIREGUARD),
        )
        if (cidr := _opt_cidr(text)) is not None
    }
    return NodeInfo(addrs.v4, addrs.v6, frozenset(hosts), frozenset(tunnels))


def block_routes(value: v1.AllocationBlock) -> dict[Cidr, tuple[str, bool]]:
    """``{cidr: (node, borrowed)}``: the block itself via its affine host (if any), and each
    IP allocated by a different node (``secondary.node`` attribute) via that node - borrowed
    when the block belongs to someone else. Allocations with no recorded node get no route."""
    out: dict[Cidr, tuple[str, bool]] = {}
    block = to_cidr(value.cidr)
    affinity = value.affinity or ""
    host = affinity[len("host:") :] if affinity.startswith("host:") else ""
    attrs = value.attributes
    net = ipaddress.ip_network(value.cidr, strict=False)
    for ordinal, attr_index in enumerate(value.allocations):
        if attr_index is None or not 0 <= attr_index < len(attrs):
            continue
        node = attrs[attr_index].secondary.get("node") or ""
        if node and node != host:
            ip = net.network_address + ordinal
            out[to_cidr(ip)] = (node, bool(host))
    if host:
        out[block] = (host, False)
    return out


def wep_cidrs(value: v1.WorkloadEndpoint) -> frozenset[Cidr]:
    return frozenset(to_cidr(n) for n in (*value.ipv4_nets, *value.ipv6_nets))


# --- per-CIDR facts and the route they make -------------------------------------------------


@dataclass
class Entry:
    """Everything known about one exact CIDR, from every source."""

    pool: PoolInfo | None = None
    blocks: dict[Cidr, tuple[str, bool]] = field(default_factory=dict)  # by source block
    hosts: Counter[str] = field(default_factory=Counter)
    refs: Counter[tuple[str, RefType]] = field(default_factory=Counter)

    def is_route(self) -> bool:
        return self.pool is not None or bool(self.blocks or self.hosts or self.refs)


def compute_route(
    cidr: Cidr, path: Iterable[Entry], nodes: Mapping[str, NodeInfo], me: str
) -> RouteUpdate:
    """The route for ``cidr`` from the entries of every CIDR containing it (least specific
    first, ``cidr``'s own last). Later (more specific) facts override the destination."""
    rtype, pool_type, nat, cross = RouteType.CIDR_INFO, IPPoolType.NONE, False, False
    node, block_node, borrowed, local_wl, tunnel = "", "", False, False, ""
    for e in path:
        if e.pool is not None:
            pool_type = e.pool.type
            nat |= e.pool.nat_outgoing
            cross |= e.pool.cross_subnet
        if e.blocks:
            # Two blocks can name the same CIDR (a /32 block and an IP borrowed from a wider
            # block): the narrower block is authoritative.
            src = min(e.blocks, key=lambda b: (-b[2], b[1]))
            node, borrowed = e.blocks[src]
            block_node = node
            rtype = RouteType.LOCAL_WORKLOAD if node == me else RouteType.REMOTE_WORKLOAD
        if e.hosts:
            node = min(e.hosts)
            rtype = RouteType.LOCAL_HOST if node == me else RouteType.REMOTE_HOST
        if e.refs:
            node, kind = min(e.refs)
            local = node == me
            if kind is RefType.WEP:
                rtype = RouteType.LOCAL_WORKLOAD if local else RouteType.REMOTE_WORKLOAD
                local_wl = local
            else:
                rtype = RouteType.LOCAL_TUNNEL if local else RouteType.REMOTE_TUNNEL
                kinds = sorted({k for n, k in e.refs if n == node and k is not RefType.WEP})
                tunnel = ",".join(k.name.lower() for k in kinds)
    dst = nodes.get(node) if node else None
    return RouteUpdate(
        dst=cidr_str(cidr),
        types=frozenset({rtype}),
        ip_pool_type=pool_type,
        dst_node_name=node,
        dst_node_ip=dst.ip_for(cidr[0]) if dst else "",
        same_subnet=cross and _same_subnet(nodes.get(me), dst),
        nat_outgoing=nat,
        local_workload=local_wl,
        tunnel_type=tunnel,
        borrowed=borrowed and node == block_node,
    )


def _same_subnet(mine: NodeInfo | None, other: NodeInfo | None) -> bool:
    if mine is None or other is None:
        return False
    v4 = mine.v4 is not None and other.v4 is not None and other.v4.ip in mine.v4.network
    v6 = mine.v6 is not None and other.v6 is not None and other.v6.ip in mine.v6.network
    return v4 or v6


# --- the incremental calculation node -----------------------------------------------------


class L3RouteResolver:
    """Registers ResourceKey (Node), IPPoolKey, and BlockKey + local WorkloadEndpointKey
    (route_source "CalicoIPAM") or every WorkloadEndpointKey ("WorkloadIPs").

    Invariant (checked against the oracle): after every update, the routes sent and not
    removed equal ``compute_route`` for every CIDR with its own facts. A change marks
    dirty the changed CIDR and every CIDR inside it, the routes whose destination node
    changed, and - when this host's node changes - every route (same-subnet flags).
    """

    def __init__(
        self, callbacks: PipelineCallbacks, hostname: str, route_source: str = "CalicoIPAM"
    ) -> None:
        if route_source not in ROUTE_SOURCES:
            raise ValueError(f"route_source must be one of {ROUTE_SOURCES}, not {route_source!r}")
        self._cb = callbacks
        self._me = hostname
        self._route_source = route_source
        self._entries: dict[Cidr, Entry] = {}
        self._ordered: dict[int, list[tuple[int, int]]] = {4: [], 6: []}  # (addr, plen)
        self._plens: dict[int, Counter[int]] = {4: Counter(), 6: Counter()}
        self._blocks: dict[Cidr, dict[Cidr, tuple[str, bool]]] = {}
        self._nodes: dict[str, NodeInfo] = {}
        self._weps: dict[WorkloadEndpointKey, frozenset[Cidr]] = {}
        self._sent: dict[Cidr, RouteUpdate] = {}
        self._sent_by_node: dict[str, set[Cidr]] = {}
        self._dirty: set[Cidr] = set()

    def register(self, fanout: TypeFanout, local_fanout: TypeFanout | None = None) -> None:
        """``local_fanout`` (local endpoints only), if given, takes the WEP handler in
        CalicoIPAM mode; the handler filters on hostname itself either way."""
        fanout.register(ResourceKey, self.on_resource)
        fanout.register(IPPoolKey, self.on_pool)
        if self._route_source == "WorkloadIPs":
            fanout.register(WorkloadEndpointKey, self.on_workload)
        else:
            fanout.register(BlockKey, self.on_block)
            (local_fanout or fanout).register(WorkloadEndpointKey, self.on_workload)

    # -- handlers ---------------------------------------------------------------------------

    def on_pool(self, key: IPPoolKey, value: v1.IPPool | None) -> None:
        info = pool_info(value) if value is not None else None
        self._change(to_cidr(key.cidr), lambda e: setattr(e, "pool", info))
        self._flush()

    def on_block(self, key: BlockKey, value: v1.AllocationBlock | None) -> None:
        src = to_cidr(key.cidr)
        old = self._blocks.pop(src, {})
        new = block_routes(value) if value is not None else {}
        if new:
            self._blocks[src] = new
        for cidr in old.keys() - new.keys():
            self._change(cidr, lambda e: e.blocks.pop(src))
        for cidr, route in new.items():
            if old.get(cidr) != route:
                self._change(cidr, lambda e, r=route: e.blocks.__setitem__(src, r))
        self._flush()

    def on_workload(self, key: WorkloadEndpointKey, value: v1.WorkloadEndpoint | None) -> None:
        if self._route_source == "CalicoIPAM" and key.hostname != self._me:
            return
        old = self._weps.pop(key, frozenset())
        new = wep_cidrs(value) if value is not None else frozenset()
        if new:
            self._weps[key] = new
        ref = (key.hostname, RefType.WEP)
        self._change_refs(new - old, old - new, ref)
        self._flush()

    def on_resource(self, key: ResourceKey, value: Node | None) -> None:
        if key.kind != "Node":
            return
        name = key.name
        new = node_info(value) if value is not None else None
        old = self._nodes.get(name)
        if new == old:
            return
        new_hosts = new.hosts if new else frozenset()
        old_hosts = old.hosts if old else frozenset()
        for cidr in new_hosts - old_hosts:
            self._change(cidr, lambda e: e.hosts.update((name,)))
        for cidr in old_hosts - new_hosts:
            self._change(cidr, lambda e: e.hosts.subtract((name,)))
        new_tun = new.tunnels if new else frozenset()
        old_tun = old.tunnels if old else frozenset()
        for cidr, kind in new_tun - old_tun:
            self._change_refs((cidr,), (), (name, kind))
        for cidr, kind in old_tun - new_tun:
            self._change_refs((), (cidr,), (name, kind))
        if new is None:
            del self._nodes[name]
        else:
            self._nodes[name] = new
        self._dirty.update(self._sent if name == self._me else self._sent_by_node.get(name, ()))
        self._flush()

    # -- bookkeeping ------------------------------------------------------------------------

    def _change_refs(
        self, added: Iterable[Cidr], removed: Iterable[Cidr], ref: tuple[str, RefType]
    ) -> None:
        for cidr in added:
            self._change(cidr, lambda e: e.refs.update((ref,)))
        for cidr in removed:
            self._change(cidr, lambda e: e.refs.subtract((ref,)))

    def _change(self, cidr: Cidr, mutate: Any) -> None:
        """Apply ``mutate`` to ``cidr``'s entry (created on demand, dropped when empty) and
        mark it and everything inside it dirty."""
        entry = self._entries.get(cidr)
        if entry is None:
            entry = self._entries[cidr] = Entry()
            insort(self._ordered[cidr[0]], (cidr[1], cidr[2]))
            self._plens[cidr[0]][cidr[2]] += 1
        mutate(entry)
        entry.hosts = +entry.hosts  # drop zero counts
        entry.refs = +entry.refs
        self._mark_subtree(cidr)
        if not entry.is_route():
            del self._entries[cidr]
            ordered = self._ordered[cidr[0]]
            del ordered[bisect_left(ordered, (cidr[1], cidr[2]))]
            self._plens[cidr[0]][cidr[2]] -= 1

    def _mark_subtree(self, cidr: Cidr) -> None:
        version, addr, plen = cidr
        last = addr | ((1 << (_BITS[version] - plen)) - 1)
        ordered = self._ordered[version]
        lo = bisect_left(ordered, (addr, plen))
        hi = bisect_right(ordered, (last, _BITS[version]))
        self._dirty.add(cidr)
        self._dirty.update((version, a, p) for a, p in ordered[lo:hi] if p > plen)

    def _path(self, cidr: Cidr) -> list[Entry]:
        plens = self._plens[cidr[0]]
        out = []
        for plen in sorted(p for p, n in plens.items() if n > 0 and p <= cidr[2]):
            entry = self._entries.get(_supernet(cidr, plen))
            if entry is not None:
                out.append(entry)
        return out

    def _flush(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for cidr in sorted(dirty):
            entry = self._entries.get(cidr)
            old = self._sent.get(cidr)
            if entry is None:
                if old is not None:
                    self._forget(cidr, old)
                    self._cb.on_route_remove(old.dst)
                continue
            route = compute_route(cidr, self._path(cidr), self._nodes, self._me)
            if route == old:
                continue
            if old is not None:
                self._forget(cidr, old)
            self._sent[cidr] = route
            self._sent_by_node.setdefault(route.dst_node_name, set()).add(cidr)
            self._cb.on_route_update(route)

    def _forget(self, cidr: Cidr, route: RouteUpdate) -> None:
        del self._sent[cidr]
        by_node = self._sent_by_node[route.dst_node_name]
        by_node.discard(cidr)
        if not by_node:
            del self._sent_by_node[route.dst_node_name]
