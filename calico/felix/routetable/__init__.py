"""Workload routes in the main routing table, programmed over netlink (pyroute2)."""

from calico.felix.routetable.model import ApplyResult, KernelRoute, LinkInfo, RouteTarget
from calico.felix.routetable.netlink import PyRoute2Netlink, RouteNetlink, RouteNetlinkError
from calico.felix.routetable.table import RouteTable

__all__ = [
    "ApplyResult",
    "KernelRoute",
    "LinkInfo",
    "PyRoute2Netlink",
    "RouteNetlink",
    "RouteNetlinkError",
    "RouteTable",
    "RouteTarget",
]
