"""What one VXLAN family should look like in the kernel, computed from the calc graph's VTEPs
and routes (design/felix-dataplane.md "VXLAN").

Pure functions only: the manager feeds them its current view and diffs the result against
the kernel. Upstream's rules (felix/dataplane/linux/vxlan_mgr.go, route_mgr.go):

- device ``vxlan.calico`` (v4) / ``vxlan-v6.calico`` (v6): VNI ``VXLANVNI`` for both, UDP
  port ``VXLANPort``, MTU ``VXLANMTU(V6)`` (host MTU - 50 / - 70 when 0), MAC and address from
  this node's own VTEP, underlay local address = this node's IP;
- per remote VTEP: a permanent ARP/NDP entry tunnel IP -> VTEP MAC and an FDB entry
  VTEP MAC -> node IP;
- a remote block of a VXLAN pool: via the peer's tunnel IP, dev vxlan, onlink, proto
  ``DeviceRouteProtocol``, RTAX_MTU; with ``same_subnet`` (CrossSubnet pool, peer in our
  subnet) via the peer's node IP on the parent NIC, onlink, proto 80;
- a peer tunnel address that is its own route (dedicated /32 tunnel block, or borrowed):
  scope link on the vxlan device;
- our own VXLAN blocks (not /32 or /128, not a local workload): blackhole, proto 80.

Bad input never stops the rest: a VTEP with a malformed MAC or address is skipped, and of two
nodes claiming one tunnel IP (or MAC) the first by name wins; each case yields an error text.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from calico.felix.messages import IPPoolType, RouteType, RouteUpdate, VXLANTunnelEndpointUpdate

DEVICE_NAMES = {4: "vxlan.calico", 6: "vxlan-v6.calico"}
OVERHEAD = {4: 50, 6: 70}
EXCLUSIVE_PROTO = 80  # upstream dataplanedefs.DefaultRouteProto
RTPROT_BOOT = 3
RT_SCOPE_UNIVERSE, RT_SCOPE_LINK = 0, 253
_MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")


def exclusive_proto(device_route_protocol: int) -> int:
    """The protocol marking routes Felix owns on any device: DeviceRouteProtocol unless it is
    the shared "boot" (3), then 80."""
    return EXCLUSIVE_PROTO if device_route_protocol == RTPROT_BOOT else device_route_protocol


def default_mtu(host_mtu: int, version: int) -> int:
    return host_mtu - OVERHEAD[version]


@dataclass(frozen=True)
class VTEP:
    """One node's tunnel endpoint for one family (addresses and MAC validated)."""

    node: str
    tunnel_ip: str
    mac: str
    node_ip: str


class VTEPError(ValueError):
    """A VTEP message with unusable fields; the text names the node and the field."""


def _ip(text: str, version: int, what: str, node: str) -> str:
    try:
        addr = ipaddress.ip_address(text.strip())
    except ValueError:
        raise VTEPError(f"node {node}: malformed VXLAN {what} {text!r}") from None
    if addr.version != version:
        raise VTEPError(f"node {node}: VXLAN {what} {text!r} is not IPv{version}")
    return str(addr)


@functools.lru_cache(maxsize=8192)
def parse_vtep(msg: VXLANTunnelEndpointUpdate, version: int) -> VTEP | None:
    """The ``version`` half of a VTEP update; None when that family is absent. Memoised
    (messages are immutable): a full recompute after one node's change re-parses nothing."""
    if version == 4:
        tunnel, mac, parent = msg.ipv4_addr, msg.mac, msg.parent_device_ip
    else:
        tunnel, mac, parent = msg.ipv6_addr, msg.mac_v6, msg.parent_device_ipv6
    if not tunnel:
        return None
    node = msg.node
    mac_norm = mac.strip().lower().replace("-", ":")
    if not _MAC.match(mac_norm):
        raise VTEPError(f"node {node}: malformed VXLAN tunnel MAC {mac!r}")
    if int(mac_norm[:2], 16) & 1:
        raise VTEPError(f"node {node}: VXLAN tunnel MAC {mac!r} is a multicast address")
    return VTEP(
        node=node,
        tunnel_ip=_ip(tunnel, version, "tunnel address", node),
        mac=mac_norm,
        node_ip=_ip(parent, version, "node address", node),
    )


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    version: int
    vni: int
    port: int
    mtu: int
    mac: str
    local_ip: str  # underlay address (this node's IP); the parent is the link carrying it
    address: str  # own tunnel IP, the device's only address of its family


@dataclass(frozen=True)
class RouteSpec:
    """A main-table route; ``device`` is a name ("" = blackhole), ``gateway`` "" = none."""

    cidr: str
    device: str = ""
    gateway: str = ""
    proto: int = RTPROT_BOOT
    scope: int = RT_SCOPE_UNIVERSE
    onlink: bool = False
    mtu: int = 0

    @property
    def blackhole(self) -> bool:
        return not self.device


@dataclass
class Desired:
    device: DeviceSpec | None = None
    neighbours: dict[str, str] = field(default_factory=dict)  # tunnel IP -> MAC
    fdb: dict[str, str] = field(default_factory=dict)  # MAC -> node IP
    routes: dict[str, RouteSpec] = field(default_factory=dict)  # CIDR -> route
    remote_node_ips: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Settings:
    version: int
    hostname: str
    vni: int = 4096
    port: int = 4789
    mtu: int = 1450
    device_route_protocol: int = RTPROT_BOOT

    @property
    def device_name(self) -> str:
        return DEVICE_NAMES[self.version]


def _net(cidr: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(cidr, strict=False)


def select_vteps(
    settings: Settings, vteps: Mapping[str, VXLANTunnelEndpointUpdate]
) -> tuple[VTEP | None, dict[str, VTEP], list[str]]:
    """(own VTEP, remote VTEPs by node, errors). Conflicts are settled by node name, own
    node first, so the outcome does not depend on message order."""
    errors: list[str] = []
    own: VTEP | None = None
    remotes: dict[str, VTEP] = {}
    by_ip: dict[str, str] = {}
    by_mac: dict[str, str] = {}
    me = settings.hostname
    for node in sorted(vteps, key=lambda n: (n != me, n)):
        try:
            vtep = parse_vtep(vteps[node], settings.version)
        except VTEPError as e:
            errors.append(f"{e}; ignoring its VTEP")
            continue
        if vtep is None:
            continue
        if (holder := by_ip.get(vtep.tunnel_ip)) is not None:
            errors.append(
                f"nodes {holder} and {node} both claim VXLAN tunnel address "
                f"{vtep.tunnel_ip}; ignoring {node}'s VTEP"
            )
            continue
        if (holder := by_mac.get(vtep.mac)) is not None:
            errors.append(
                f"nodes {holder} and {node} both claim VXLAN tunnel MAC {vtep.mac}; "
                f"ignoring {node}'s VTEP"
            )
            continue
        by_ip[vtep.tunnel_ip] = node
        by_mac[vtep.mac] = node
        if node == me:
            own = vtep
        else:
            remotes[node] = vtep
    return own, remotes, errors


def route_for(
    settings: Settings,
    route: RouteUpdate,
    remotes: Mapping[str, VTEP],
    parent: str,
) -> RouteSpec | None:
    """The kernel route for one calc-graph route, or None when this manager has none for it
    (other family or pool type, local/host entries, or data still missing)."""
    return _route_for(settings, route, remotes.get(route.dst_node_name), parent)


@functools.lru_cache(maxsize=65536)
def _route_for(
    settings: Settings, route: RouteUpdate, vtep: VTEP | None, parent: str
) -> RouteSpec | None:
    """:func:`route_for` given only the destination node's VTEP: memoised on immutable
    inputs, so recomputing 1,000 unchanged routes costs dictionary lookups."""
    if route.ip_pool_type is not IPPoolType.VXLAN:
        return None
    net = _net(route.dst)
    if net.version != settings.version:
        return None
    types = route.types
    single = net.prefixlen == net.max_prefixlen
    device, proto = settings.device_name, settings.device_route_protocol
    if RouteType.REMOTE_TUNNEL in types and (RouteType.REMOTE_WORKLOAD in types or route.borrowed):
        if vtep is None:
            return None
        return RouteSpec(
            str(net), device=device, proto=proto, scope=RT_SCOPE_LINK, mtu=settings.mtu
        )
    if RouteType.REMOTE_WORKLOAD in types:
        if route.same_subnet and parent and route.dst_node_ip:
            return RouteSpec(
                str(net),
                device=parent,
                gateway=route.dst_node_ip,
                proto=exclusive_proto(proto),
                onlink=True,
            )
        if vtep is None:
            return None
        return RouteSpec(
            str(net),
            device=device,
            gateway=vtep.tunnel_ip,
            proto=proto,
            onlink=True,
            mtu=settings.mtu,
        )
    if RouteType.LOCAL_WORKLOAD in types and not route.local_workload and not single:
        return RouteSpec(str(net), proto=exclusive_proto(proto))
    return None


def compute_desired(
    settings: Settings,
    vteps: Mapping[str, VXLANTunnelEndpointUpdate],
    routes: Mapping[str, RouteUpdate],
    parent: str = "",
) -> Desired:
    """The whole desired state for one family. ``parent`` is the name of the link carrying
    this node's underlay address ("" if unknown: same-subnet routes fall back to the tunnel)."""
    own, remotes, errors = select_vteps(settings, vteps)
    out = Desired(errors=errors)
    if own is not None:
        out.device = DeviceSpec(
            name=settings.device_name,
            version=settings.version,
            vni=settings.vni,
            port=settings.port,
            mtu=settings.mtu,
            mac=own.mac,
            local_ip=own.node_ip,
            address=own.tunnel_ip,
        )
    for vtep in remotes.values():
        out.neighbours[vtep.tunnel_ip] = vtep.mac
        out.fdb[vtep.mac] = vtep.node_ip
        out.remote_node_ips.add(vtep.node_ip)
    for route in routes.values():
        spec = route_for(settings, route, remotes, parent)
        if spec is not None:
            out.routes[spec.cidr] = spec
    return out


__all__ = [
    "DEVICE_NAMES",
    "OVERHEAD",
    "VTEP",
    "Desired",
    "DeviceSpec",
    "RouteSpec",
    "Settings",
    "VTEPError",
    "compute_desired",
    "default_mtu",
    "exclusive_proto",
    "parse_vtep",
    "route_for",
    "select_vteps",
]
