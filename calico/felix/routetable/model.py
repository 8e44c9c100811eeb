"""Value types shared by the route table's planner, netlink layer and orchestrator."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

RTPROT_KERNEL = 2  # routes the kernel adds for interface addresses; never ours to touch
RTPROT_BOOT = 3  # DeviceRouteProtocol default
RT_SCOPE_UNIVERSE = 0
RT_SCOPE_LINK = 253
RTN_UNICAST = 1
MAIN_TABLE = 254
DEFAULT_METRIC = 1024  # IPv4/IPv6NormalRoutePriority


def normalize_cidr(cidr: str) -> str:
    """Canonical ``addr/len`` text; a bare address becomes a host route (/32 or /128)."""
    return str(ipaddress.ip_network(cidr.strip(), strict=False))


def cidr_ip_version(cidr: str) -> int:
    return ipaddress.ip_network(cidr, strict=False).version


def cidr_addr(cidr: str) -> str:
    """The network address of a CIDR (the workload IP for a host route)."""
    return str(ipaddress.ip_network(cidr, strict=False).network_address)


@dataclass(frozen=True)
class RouteTarget:
    """One route we want on an interface; ``dest_mac`` adds a permanent neighbour entry."""

    cidr: str
    dest_mac: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "cidr", normalize_cidr(self.cidr))
        if self.dest_mac is not None:
            mac = self.dest_mac.strip().lower()
            object.__setattr__(self, "dest_mac", mac or None)

    @property
    def ip_version(self) -> int:
        return cidr_ip_version(self.cidr)


@dataclass(frozen=True)
class KernelRoute:
    """A main-table unicast route as read back from (or written to) the kernel."""

    cidr: str
    ifindex: int
    proto: int
    scope: int
    metric: int

    @property
    def ip_version(self) -> int:
        return cidr_ip_version(self.cidr)


@dataclass(frozen=True)
class LinkInfo:
    """What the route table needs to know about an interface."""

    name: str
    index: int
    admin_up: bool


@dataclass
class ApplyResult:
    """Outcome of one :meth:`calico.felix.routetable.table.RouteTable.apply`.

    ``moved_ips``/``removed_ips`` are plain addresses whose conntrack entries should be flushed:
    an IP moved when its route now points at a different interface than at the previous apply,
    removed when no interface wants it any more (or a stale route for it was deleted).
    """

    moved_ips: set[str] = field(default_factory=set)
    removed_ips: set[str] = field(default_factory=set)
    pending_ifaces: set[str] = field(default_factory=set)  # wanted, but absent or admin-down
    errors: dict[str, str] = field(default_factory=dict)  # iface (or "*") -> error text
    resynced: bool = False

    @property
    def conntrack_flush_ips(self) -> set[str]:
        return self.moved_ips | self.removed_ips

    @property
    def ok(self) -> bool:
        return not self.errors
