"""Conntrack counters by original tuple: a ctnetlink dump per address family, and DESTROY events.

Why both: the counters the collector reports are cumulative per connection, and a periodic
dump reads them for every tracked connection at once (the collector only keeps the entries
whose tuples it saw a verdict for); but a connection whose entry goes between two dumps would
lose its final counters, so ``DestroyEvents`` hears each entry's last counters as the kernel
frees it. The dump stays as the resync: events can be dropped (a full socket buffer) and are
not sent when the namespace's ``nf_conntrack_events`` is 0.

Why a stdlib netlink socket and not pyroute2: pyroute2 decodes every attribute of every entry
into dicts, which at a few thousand entries costs Felix a CPU core for a second per poll
(measured by bench_felix_flowlogs.py); this reads only tuples and counters. ``parse_dump`` and
``parse_events`` are pure (tested against an encoder).
"""

from __future__ import annotations

import errno
import logging
import socket
import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from calico.felix.collector.nflog import NETLINK_NETFILTER, FiveTuple

log = logging.getLogger(__name__)

NFNL_SUBSYS_CTNETLINK = 1
IPCTNL_MSG_CT_NEW = 0
IPCTNL_MSG_CT_GET = 1
IPCTNL_MSG_CT_DELETE = 2
NFNLGRP_CONNTRACK_DESTROY = 3
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
CTA_TUPLE_ORIG = 1
CTA_TUPLE_REPLY = 2
CTA_COUNTERS_ORIG = 9
CTA_COUNTERS_REPLY = 10
CTA_TUPLE_IP = 1
CTA_TUPLE_PROTO = 2
CTA_IP_V4_SRC, CTA_IP_V4_DST, CTA_IP_V6_SRC, CTA_IP_V6_DST = 1, 2, 3, 4
CTA_PROTO_NUM, CTA_PROTO_SRC_PORT, CTA_PROTO_DST_PORT = 1, 2, 3
CTA_COUNTERS_PACKETS, CTA_COUNTERS_BYTES = 1, 2

_HDR = struct.Struct("=IHHII")
_ATTR = struct.Struct("=HH")
_BE16 = struct.Struct("!H")
_BE64 = struct.Struct("!Q")


class CtCounters(NamedTuple):
    orig_packets: int
    orig_bytes: int
    reply_packets: int
    reply_bytes: int


Entry = tuple[FiveTuple, FiveTuple, CtCounters]  # original tuple, post-NAT view, counters


class ConntrackError(OSError):
    """The kernel refused or broke off the dump."""


def _attrs(data: bytes, offset: int, end: int) -> dict[int, tuple[int, int]]:
    """type -> (value start, value end) for the attributes in data[offset:end]."""
    out = {}
    while offset + 4 <= end:
        length, atype = _ATTR.unpack_from(data, offset)
        if length < 4 or offset + length > end:
            break
        out[atype & 0x3FFF] = (offset + 4, offset + length)
        offset += (length + 3) & ~3
    return out


def _tuple(data: bytes, span: tuple[int, int] | None) -> FiveTuple | None:
    if span is None:
        return None
    top = _attrs(data, *span)
    ip, proto = top.get(CTA_TUPLE_IP), top.get(CTA_TUPLE_PROTO)
    if ip is None or proto is None:
        return None
    ips = _attrs(data, *ip)
    if CTA_IP_V4_SRC in ips and CTA_IP_V4_DST in ips:
        family, src_at, dst_at = socket.AF_INET, ips[CTA_IP_V4_SRC], ips[CTA_IP_V4_DST]
    elif CTA_IP_V6_SRC in ips and CTA_IP_V6_DST in ips:
        family, src_at, dst_at = socket.AF_INET6, ips[CTA_IP_V6_SRC], ips[CTA_IP_V6_DST]
    else:
        return None
    ports = _attrs(data, *proto)
    num = ports.get(CTA_PROTO_NUM)
    if num is None:
        return None
    sport = dport = 0
    if CTA_PROTO_SRC_PORT in ports and CTA_PROTO_DST_PORT in ports:
        sport = _BE16.unpack_from(data, ports[CTA_PROTO_SRC_PORT][0])[0]
        dport = _BE16.unpack_from(data, ports[CTA_PROTO_DST_PORT][0])[0]
    return FiveTuple(
        data[num[0]],
        socket.inet_ntop(family, data[src_at[0] : src_at[1]]),
        socket.inet_ntop(family, data[dst_at[0] : dst_at[1]]),
        sport,
        dport,
    )


def _counts(data: bytes, span: tuple[int, int] | None) -> tuple[int, int]:
    if span is None:
        return 0, 0
    c = _attrs(data, *span)
    packets, nbytes = c.get(CTA_COUNTERS_PACKETS), c.get(CTA_COUNTERS_BYTES)
    return (
        _BE64.unpack_from(data, packets[0])[0] if packets else 0,
        _BE64.unpack_from(data, nbytes[0])[0] if nbytes else 0,
    )


def _entry(data: bytes, top: dict[int, tuple[int, int]]) -> Entry | None:
    orig = _tuple(data, top.get(CTA_TUPLE_ORIG))
    reply = _tuple(data, top.get(CTA_TUPLE_REPLY))
    if orig is None or reply is None:
        return None
    op, ob = _counts(data, top.get(CTA_COUNTERS_ORIG))
    rp, rb = _counts(data, top.get(CTA_COUNTERS_REPLY))
    seen = FiveTuple(reply.proto, reply.dst, reply.src, reply.dport, reply.sport)
    return orig, seen, CtCounters(op, ob, rp, rb)


def parse_dump(data: bytes) -> tuple[list[Entry], bool]:
    """(entries, done) from one datagram of a ctnetlink dump: per entry its original tuple,
    its reply tuple reversed (the post-NAT view from the originator's side) and its counters;
    ``done`` once NLMSG_DONE arrives. A kernel error raises ``ConntrackError``."""
    return _parse(data, IPCTNL_MSG_CT_NEW)


def parse_events(data: bytes) -> list[Entry]:
    """The destroyed entries in one datagram of DESTROY events, as ``parse_dump``'s; other
    message types are skipped."""
    return _parse(data, IPCTNL_MSG_CT_DELETE)[0]


def _parse(data: bytes, want: int) -> tuple[list[Entry], bool]:
    entries = []
    offset = 0
    while offset + _HDR.size <= len(data):
        length, mtype, _flags, _seq, _pid = _HDR.unpack_from(data, offset)
        if length < _HDR.size or offset + length > len(data):
            break
        end = offset + length
        if mtype == NLMSG_DONE:
            return entries, True
        if mtype == NLMSG_ERROR and end >= offset + _HDR.size + 4:
            code = -struct.unpack_from("=i", data, offset + _HDR.size)[0]
            if code:
                raise ConntrackError(code, f"conntrack dump: {errno.errorcode.get(code, code)}")
        elif mtype == (NFNL_SUBSYS_CTNETLINK << 8) | want:
            try:
                entry = _entry(data, _attrs(data, offset + _HDR.size + 4, end))
            except (struct.error, IndexError, ValueError):
                entry = None  # a malformed entry (never from a sane kernel): skipped
            if entry is not None:
                entries.append(entry)
        offset += (length + 3) & ~3
    return entries, False


def dump_request(family: int, seq: int = 1) -> bytes:
    body = struct.pack("=BBH", family, 0, 0)
    mtype = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET
    return _HDR.pack(_HDR.size + len(body), mtype, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body


def dump_entries(family: int) -> Iterator[Entry]:
    """Every entry of one family in this network namespace."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    try:
        sock.settimeout(5.0)
        sock.bind((0, 0))
        sock.send(dump_request(family))
        while True:
            entries, done = parse_dump(sock.recv(1 << 16))
            yield from entries
            if done:
                return
    finally:
        sock.close()


class CtTable(dict[FiveTuple, CtCounters]):
    """A dump: counters by original and by post-NAT tuple; ``orig_dst`` maps the post-NAT
    tuple of each entry whose destination was translated (DNAT: a service's cluster IP) to
    the (address, port) the connection was opened to."""

    def __init__(self) -> None:
        super().__init__()
        self.orig_dst: dict[FiveTuple, tuple[str, int]] = {}


def dump(families: Iterable[int] = (socket.AF_INET, socket.AF_INET6)) -> CtTable:
    """Every conntrack entry of this namespace, keyed by its original and its post-NAT tuple."""
    out = CtTable()
    for family in families:
        for orig, seen, counters in dump_entries(family):
            out[orig] = counters
            if seen != orig:
                out.setdefault(seen, counters)
                if seen.dst != orig.dst or seen.dport != orig.dport:
                    out.orig_dst.setdefault(seen, (orig.dst, orig.dport))
    return out


class DestroyEvents:
    """Subscribed to this namespace's conntrack DESTROY events; ``read`` drains what has
    arrived without blocking. A full socket buffer loses events (counted in ``dropped``): the
    next dump still sees those connections gone, only their last counters are missed."""

    def __init__(self, *, rcvbuf: int = 4 << 20, max_datagrams: int = 512) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.dropped = 0  # times the kernel could not deliver (ENOBUFS)
        self.max_datagrams = max_datagrams  # per read: the NFLOG reader must not starve
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.sock.bind((0, 1 << (NFNLGRP_CONNTRACK_DESTROY - 1)))
            self.sock.setblocking(False)
        except BaseException:
            self.sock.close()
            raise

    def read(self) -> list[Entry]:
        out: list[Entry] = []
        for _ in range(self.max_datagrams):
            try:
                data = self.sock.recv(1 << 16)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno != errno.ENOBUFS:
                    raise
                self.dropped += 1
                continue
            out.extend(parse_events(data))
        return out

    def close(self) -> None:
        self.sock.close()
