"""Workload route and neighbour writes, shaped as pyroute2 encodes them.

Why: pyroute2 0.9 runs an asyncio loop per request, so one workload's route and neighbour
cost 1.6-3 ms of the time to first response, see
design/performance.md "TTFR: routes and neighbours over our own rtnetlink".
The four messages are built by ``calico.felix.nlbatch``'s encoders with the parameters that
make them byte for byte what pyroute2's ``IPRoute.route``/``IPRoute.neigh`` sent for the route
table's calls (the same header fields, attributes and order; only sequence and port id differ):
RTA_OIF and RTA_PRIORITY always present and in that order, an IPv6 metric of 0 sent as 1024,
neighbour type 0, state PERMANENT on delete. They go over the
``calico.felix.nlbatch.BatchWriter`` socket that the resync's dumps already use.
"""

from __future__ import annotations

import socket
import struct

from calico.felix import nlbatch as nb
from calico.felix.nlbatch import (
    IP6_RT_PRIO_USER,
    NDA_DST,
    NDA_LLADDR,
    NLM_F_CREATE,
    NLM_F_REPLACE,
    NUD_PERMANENT,
    RTA_DST,
    RTA_OIF,
    RTA_PRIORITY,
    RTA_TABLE,
    RTM_DELROUTE,
    RTM_NEWROUTE,
    RTN_UNICAST,
    RTN_UNSPEC,
    Request,
)

_U32 = struct.Struct("=I")


def _route(msg_type: int, flags: int, rtype: int, cidr: str, oif: int, **kw: int) -> Request:
    metric = kw["metric"]
    if metric == 0 and nb.family_of(cidr) == socket.AF_INET6:
        metric = IP6_RT_PRIO_USER  # pyroute2 sent the kernel's value explicitly
    what = "replace route" if msg_type == RTM_NEWROUTE else "delete route"
    attrs = ((RTA_OIF, _U32.pack(oif)), (RTA_PRIORITY, _U32.pack(metric)))
    return nb.route_request(
        msg_type, flags, what, cidr, proto=kw["proto"], scope=kw["scope"], rtype=rtype, attrs=attrs
    )


def route_replace(cidr: str, oif: int, *, proto: int, scope: int, metric: int) -> Request:
    """A main-table unicast device route, replacing the one at (dst, metric)."""
    flags = NLM_F_CREATE | NLM_F_REPLACE
    return _route(
        RTM_NEWROUTE, flags, RTN_UNICAST, cidr, oif, proto=proto, scope=scope, metric=metric
    )


def route_delete(cidr: str, oif: int, *, proto: int, scope: int, metric: int) -> Request:
    """Delete the main-table route at (dst, metric) on ``oif`` with that protocol."""
    return _route(RTM_DELROUTE, 0, RTN_UNSPEC, cidr, oif, proto=proto, scope=scope, metric=metric)


def neigh_replace(ip: str, mac: str, ifindex: int) -> Request:
    """Permanent neighbour entry ``ip -> mac`` on ``ifindex`` (created or replaced)."""
    return nb.neigh_replace(ifindex, ip, mac, ntype=0)


def neigh_delete(ip: str, ifindex: int) -> Request:
    """Delete the entry for ``ip`` on ``ifindex`` (pyroute2 sends state PERMANENT here too)."""
    return nb.neigh_delete(ifindex, ip, state=NUD_PERMANENT)


__all__ = [
    "NDA_DST",
    "NDA_LLADDR",
    "RTA_DST",
    "RTA_OIF",
    "RTA_PRIORITY",
    "RTA_TABLE",
    "neigh_delete",
    "neigh_replace",
    "route_delete",
    "route_replace",
]
