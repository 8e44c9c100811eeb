"""Workload route and neighbour writes encoded with ``struct``, as pyroute2 encodes them.

Why: pyroute2 0.9 runs an asyncio loop per request, so one workload's route and neighbour
cost 1.6-3 ms of the time to first response, see
design/performance.md "TTFR: routes and neighbours over our own rtnetlink".
These four message shapes are packed here byte for byte as pyroute2's
``IPRoute.route``/``IPRoute.neigh`` pack them for the route table's calls (the same header
fields, attributes and order; only sequence and port id differ) and sent over the
``calico.felix.nlbatch.BatchWriter`` socket that the resync's dumps already use.
"""

from __future__ import annotations

import socket
import struct

from calico.felix.nlbatch import (
    NLM_F_CREATE,
    NLM_F_REPLACE,
    RTM_DELNEIGH,
    RTM_DELROUTE,
    RTM_NEWNEIGH,
    RTM_NEWROUTE,
    Request,
)
from calico.felix.routetable.model import MAIN_TABLE, RTN_UNICAST

RTN_UNSPEC = 0
NUD_PERMANENT = 0x80
RTA_DST, RTA_OIF, RTA_PRIORITY, RTA_TABLE = 1, 4, 6, 15
NDA_DST, NDA_LLADDR = 1, 2
_RTMSG = struct.Struct("=BBBBBBBBI")  # family, dst_len, src_len, tos, table, proto, scope, type
_NDMSG = struct.Struct("=BxxxiHBB")  # family, ifindex, state, flags, type
_RTA = struct.Struct("=HH")
_U32 = struct.Struct("=I")


def _attr(kind: int, data: bytes) -> bytes:
    length = _RTA.size + len(data)
    return _RTA.pack(length, kind) + data + b"\0" * (-length % 4)


def _split(cidr: str) -> tuple[int, bytes, int]:
    addr, _, plen = cidr.partition("/")
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    return family, socket.inet_pton(family, addr), int(plen)


def _route(msg_type: int, flags: int, rtype: int, what: str, cidr: str, **kw: int) -> Request:
    family, dst, plen = _split(cidr)
    oif, proto, scope, metric = kw["oif"], kw["proto"], kw["scope"], kw["metric"]
    if family == socket.AF_INET6 and metric == 0:
        metric = 1024  # the kernel's IP6_RT_PRIO_USER for 0, which pyroute2 sends explicitly
    body = _RTMSG.pack(family, plen, 0, 0, MAIN_TABLE, proto, scope, rtype, 0)
    body += _attr(RTA_DST, dst) + _attr(RTA_TABLE, _U32.pack(MAIN_TABLE))
    body += _attr(RTA_OIF, _U32.pack(oif)) + _attr(RTA_PRIORITY, _U32.pack(metric))
    return Request(f"{what} {cidr}", msg_type, flags, body)


def route_replace(cidr: str, oif: int, *, proto: int, scope: int, metric: int) -> Request:
    """A main-table unicast device route, replacing the one at (dst, metric)."""
    return _route(
        RTM_NEWROUTE,
        NLM_F_CREATE | NLM_F_REPLACE,
        RTN_UNICAST,
        "replace route",
        cidr,
        oif=oif,
        proto=proto,
        scope=scope,
        metric=metric,
    )


def route_delete(cidr: str, oif: int, *, proto: int, scope: int, metric: int) -> Request:
    """Delete the main-table route at (dst, metric) on ``oif`` with that protocol."""
    return _route(
        RTM_DELROUTE,
        0,
        RTN_UNSPEC,
        "delete route",
        cidr,
        oif=oif,
        proto=proto,
        scope=scope,
        metric=metric,
    )


def _neigh(ip: str, ifindex: int) -> tuple[bytes, bytes]:
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    header = _NDMSG.pack(family, ifindex, NUD_PERMANENT, 0, 0)
    return header, _attr(NDA_DST, socket.inet_pton(family, ip))


def neigh_replace(ip: str, mac: str, ifindex: int) -> Request:
    """Permanent neighbour entry ``ip -> mac`` on ``ifindex`` (created or replaced)."""
    header, dst = _neigh(ip, ifindex)
    body = header + dst + _attr(NDA_LLADDR, bytes.fromhex(mac.replace(":", "")))
    return Request(f"set neighbour {ip}", RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE, body)


def neigh_delete(ip: str, ifindex: int) -> Request:
    """Delete the entry for ``ip`` on ``ifindex`` (pyroute2 sends state PERMANENT here too)."""
    header, dst = _neigh(ip, ifindex)
    return Request(f"delete neighbour {ip}", RTM_DELNEIGH, 0, header + dst)
