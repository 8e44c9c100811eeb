"""Which device a packet between two nodes crosses, decided as Felix routes it
(design/explain.md "Tunnel devices"), so explain knows whose host endpoint forward chains see
it: a named uplink endpoint's do not apply on ``vxlan.calico``, a ``*`` endpoint's do.

The sending node's route for the destination decides (the receiver decapsulates on the same
kind of device): the pools containing it give the pool type of the most specific one (VXLAN
over IPIP over no encapsulation) and CrossSubnet when any of them says so
(``calico.felix.calc.l3_route_resolver.pool_info`` and ``compute_route``); same subnet = the
sender's node address network holds the receiver's node address, in either family
(``_same_subnet`` there; addresses as ``calico.model.node_addresses.node_addresses``
reads them: BGP, else the first InternalIP then ExternalIP). Then, as
``calico.felix.dataplane.vxlan_model.route_for`` and upstream's IPIP manager program it: VXLAN
-> ``vxlan.calico`` / ``vxlan-v6.calico`` unless same subnet (and the receiver has an address
of the family), with no route at all when the receiver has no VTEP of the family; IPIP (v4
only) -> ``tunl0`` unless same subnet, no route when the receiver has no IPv4 address; no
encapsulation, same subnet, no route (the default route's) or no pool -> the uplink (None).
WireGuard is not modelled (its routing table and the peers' public keys are Felix's).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from calico.model import ResourceKey
from calico.model import processors as p
from calico.model.node_addresses import node_addresses
from calico.model.v3_resources import decode_resource
from calico.policyeval import convcache
from calico.policyeval.dataset import IPAddress
from calico.policyeval.storeddocs import documents

log = logging.getLogger(__name__)

VXLAN_DEVICES = {4: "vxlan.calico", 6: "vxlan-v6.calico"}
IPIP_DEVICE = "tunl0"
#: Calico's tunnel devices: an endpoint named for one is no uplink.
TUNNEL_DEVICES = frozenset({*VXLAN_DEVICES.values(), IPIP_DEVICE, "wireguard.cali", "wg-v6.cali"})
_OFF = ("", "never")


@dataclass(frozen=True)
class Pool:
    """One IP pool's encapsulation as Felix reads it (v1 spelling: always, cross-subnet,
    never)."""

    cidr: ipaddress.IPv4Network | ipaddress.IPv6Network
    name: str
    vxlan_mode: str
    ipip_mode: str

    @property
    def encap(self) -> str:
        """VXLAN wins over IPIP (a pool validation would refuse with both)."""
        if self.vxlan_mode not in _OFF:
            return "VXLAN"
        return "IPIP" if self.ipip_mode not in _OFF else "none"

    @property
    def cross_subnet(self) -> bool:
        return "cross-subnet" in (self.vxlan_mode, self.ipip_mode)

    @property
    def shown(self) -> str:
        mode = self.vxlan_mode if self.encap == "VXLAN" else self.ipip_mode
        field_name = "vxlanMode" if self.encap == "VXLAN" else "ipipMode"
        return f"pool {self.name} ({self.cidr}) {field_name} {_V3_MODE.get(mode, mode)}"


_V3_MODE = {"always": "Always", "cross-subnet": "CrossSubnet", "never": "Never"}


@dataclass(frozen=True)
class NodeNet:
    """A node's address of each family, with the prefix that makes "its subnet"."""

    v4: ipaddress.IPv4Interface | None = None
    v6: ipaddress.IPv6Interface | None = None
    vteps: frozenset[int] = frozenset()  # families with a VXLAN tunnel endpoint

    def has(self, version: int) -> bool:
        return (self.v4 if version == 4 else self.v6) is not None


@dataclass(frozen=True)
class Crossing:
    """The device a node-to-node packet crosses (None: the uplink) and why."""

    device: str | None
    reason: str


def node_net(node: Any) -> NodeNet:
    """The addresses routes use (a validated v3 Node, ``calico.model.node_addresses``) and the
    families in which it has a VXLAN tunnel endpoint."""
    addrs = node_addresses(node)
    spec = node.spec
    # A VTEP per family needs the node address and the VXLAN tunnel address
    # (``calico.felix.calc.vxlan_resolver.VXLANResolver.vtep``).
    tunnels = (
        (4, addrs.v4, spec.ipv4_vxlan_tunnel_addr),
        (6, addrs.v6, spec.ipv6_vxlan_tunnel_addr),
    )
    vteps = frozenset(version for version, addr, tunnel in tunnels if addr and tunnel)
    return NodeNet(v4=addrs.v4, v6=addrs.v6, vteps=vteps)


def same_subnet(sender: NodeNet | None, receiver: NodeNet | None) -> bool:
    """The receiver's address is in the sender's subnet, in either family (as Felix's
    route resolver tests it, whatever the routed family)."""
    if sender is None or receiver is None:
        return False
    v4 = sender.v4 is not None and receiver.v4 is not None and receiver.v4.ip in sender.v4.network
    v6 = sender.v6 is not None and receiver.v6 is not None and receiver.v6.ip in sender.v6.network
    return v4 or v6


@dataclass
class Routing:
    """The stored IP pools and Nodes, as routes between nodes need them."""

    pools: list[Pool] = field(default_factory=list)
    nodes: dict[str, NodeNet] = field(default_factory=dict)

    @classmethod
    def from_kvs(
        cls, pool_prefix: str, pool_kvs: Iterable[Any], node_prefix: str, node_kvs: Iterable[Any]
    ) -> Routing:
        out = cls()
        for name, raw, text in documents(pool_prefix, pool_kvs):
            out.add_pool(name, raw, text)
        for name, raw, text in documents(node_prefix, node_kvs):
            out.add_node(name, raw, text)
        return out

    def add_pool(self, name: str, raw: dict[str, Any], text: str | None = None) -> None:
        """A pool Felix's syncer would refuse (IPIP on IPv6, bad CIDR) is skipped, as there.
        ``text``: the stored JSON, which lets the conversion come from the conversion cache."""
        key = ResourceKey("IPPool", name)
        try:
            if text is not None:
                out = convcache.default().process(key, text, raw)
            else:
                out = p.process(key, raw)
        except Exception as exc:
            log.warning("Ignoring IPPool %s: %s", name, exc)
            return
        for value in out.values():
            cidr = ipaddress.ip_network(value.cidr, strict=False)
            self.pools.append(Pool(cidr, name, value.vxlan_mode, value.ipip_mode))

    def add_node(self, name: str, raw: dict[str, Any], text: str | None = None) -> None:
        key = ResourceKey("Node", name)

        def convert() -> dict[str, Any]:
            return {"net": node_net(decode_resource(key, raw))}

        try:
            if text is not None:
                net = convcache.default().convert("tunnels.node_net", key, text, convert)["net"]
            else:
                net = convert()["net"]
        except Exception as exc:
            log.warning("Ignoring Node %s: %s", name, exc)
            return
        self.nodes[name] = net

    def containing(self, addr: IPAddress) -> Sequence[Pool]:
        """The pools holding ``addr``, least specific first (the route resolver's path)."""
        found = [pool for pool in self.pools if addr in pool.cidr]
        return sorted(found, key=lambda pool: (pool.cidr.prefixlen, str(pool.cidr)))

    def crossing(self, sender: str, receiver: str, dst: IPAddress) -> Crossing:
        """The device ``sender``'s route for ``dst`` (an address of ``receiver``) leaves by,
        which is the device it arrives on at ``receiver``."""
        path = self.containing(dst)
        if not path:
            return Crossing(None, f"{dst} is in no IP pool: routed over the uplink")
        pool = path[-1]
        cross = any(p.cross_subnet for p in path)
        encap = pool.encap
        if encap == "none":
            reason = f"pool {pool.name} ({pool.cidr}) has no encapsulation: the uplink"
            return Crossing(None, reason)
        family = f"IPv{dst.version}"
        theirs = self.nodes.get(receiver) or NodeNet()
        direct = cross and theirs.has(dst.version)
        if direct and same_subnet(self.nodes.get(sender), theirs):
            reason = f"{pool.shown}, node {receiver} in node {sender}'s subnet: the uplink"
            return Crossing(None, reason)
        where = f"node {receiver} not in node {sender}'s subnet" if cross else ""
        if encap == "VXLAN":
            if dst.version not in theirs.vteps:
                return Crossing(None, f"{pool.shown}, but node {receiver} has no {family} VXLAN "
                                "tunnel endpoint (node and tunnel address): Felix routes none, "
                                "the default route's uplink")  # fmt: skip
            device = VXLAN_DEVICES[dst.version]
        else:
            if not theirs.has(4):
                return Crossing(None, f"{pool.shown}, but node {receiver} has no IPv4 address: "
                                "Felix routes none, the default route's uplink")  # fmt: skip
            device = IPIP_DEVICE
        return Crossing(device, f"{pool.shown}, {where}" if where else pool.shown)
