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
``parse_events`` are pure (tested against an encoder). They walk each datagram in place
(offsets, no per-message body copy: thousands of entries per poll) rather than through
:func:`calico.nlmsg.split`; the request is framed by :mod:`calico.nlmsg`.
"""

from __future__ import annotations

import errno
import logging
import socket
import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from calico import nlmsg
from calico.felix.collector.nflog import NETLINK_NETFILTER, FiveTuple
from calico.nlmsg import NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERROR

log = logging.getLogger(__name__)

NFNL_SUBSYS_CTNETLINK = 1
IPCTNL_MSG_CT_NEW = 0
IPCTNL_MSG_CT_GET = 1
IPCTNL_MSG_CT_DELETE = 2
NFNLGRP_CONNTRACK_DESTROY = 3
NLM_F_DUMP = 0x300
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


# The kernel's layout of a TCP/UDP/SCTP tuple's IP and PROTO attributes (IPv4, IPv6): one
# struct read and a header check decode it, the generic walk below handles anything else.
_FAST_V4 = struct.Struct("=HHHH4sHH4sHHHHB3xHH2s2xHH2s2x")
_FAST_V6 = struct.Struct("=HHHH16sHH16sHHHHB3xHH2s2xHH2s2x")
_FAST_HEADERS = {
    _FAST_V4: (socket.AF_INET, (20, 1, 8, 1, 8, 2, 28, 2, 5, 1, 6, 2, 6, 3)),
    _FAST_V6: (socket.AF_INET6, (44, 1, 20, 3, 20, 4, 28, 2, 5, 1, 6, 2, 6, 3)),
}


def _tuple(data: bytes, at: int, end: int) -> FiveTuple | None:
    """A CTA_TUPLE_* value (data[at:end]): a dump decodes thousands per poll, DESTROY events
    one per connection, so the usual layout takes one struct read; others the generic walk."""
    for fast, (family, want) in _FAST_HEADERS.items():
        if end - at >= fast.size:
            f = fast.unpack_from(data, at)
            if (
                f[0], f[1] & 0x3FFF, f[2], f[3], f[5], f[6], f[8], f[9] & 0x3FFF,
                f[10], f[11], f[13], f[14], f[16], f[17],
            ) == want:  # fmt: skip
                return FiveTuple(
                    f[12],
                    socket.inet_ntop(family, f[4]),
                    socket.inet_ntop(family, f[7]),
                    int.from_bytes(f[15], "big"),
                    int.from_bytes(f[18], "big"),
                )
    return _tuple_walk(data, at, end)


def _tuple_walk(data: bytes, at: int, end: int) -> FiveTuple | None:
    """A CTA_TUPLE_* value in any layout: one pass over its IP and PROTO attributes."""
    unpack = _ATTR.unpack_from
    src = dst = b""
    family = num = -1
    sport = dport = 0
    while at + 4 <= end:
        length, atype = unpack(data, at)
        if length < 4 or at + length > end:
            return None
        atype &= 0x3FFF
        inner, inner_end = at + 4, at + length
        if atype == CTA_TUPLE_IP:
            while inner + 4 <= inner_end:
                ilen, itype = unpack(data, inner)
                if ilen < 4 or inner + ilen > inner_end:
                    return None
                itype &= 0x3FFF
                value = data[inner + 4 : inner + ilen]
                if itype in (CTA_IP_V4_SRC, CTA_IP_V6_SRC):
                    src = value
                elif itype in (CTA_IP_V4_DST, CTA_IP_V6_DST):
                    dst = value
                    family = socket.AF_INET if itype == CTA_IP_V4_DST else socket.AF_INET6
                inner += (ilen + 3) & ~3
        elif atype == CTA_TUPLE_PROTO:
            while inner + 4 <= inner_end:
                ilen, itype = unpack(data, inner)
                if ilen < 4 or inner + ilen > inner_end:
                    return None
                itype &= 0x3FFF
                if itype == CTA_PROTO_NUM and ilen >= 5:
                    num = data[inner + 4]
                elif itype == CTA_PROTO_SRC_PORT and ilen >= 6:
                    sport = _BE16.unpack_from(data, inner + 4)[0]
                elif itype == CTA_PROTO_DST_PORT and ilen >= 6:
                    dport = _BE16.unpack_from(data, inner + 4)[0]
                inner += (ilen + 3) & ~3
        at += (length + 3) & ~3
    if num < 0 or family < 0 or len(src) != len(dst):
        return None
    return FiveTuple(
        num, socket.inet_ntop(family, src), socket.inet_ntop(family, dst), sport, dport
    )


def _counts(data: bytes, at: int, end: int) -> tuple[int, int]:
    packets = nbytes = 0
    while at + 4 <= end:
        length, atype = _ATTR.unpack_from(data, at)
        if length < 4 or at + length > end:
            break
        atype &= 0x3FFF
        if length >= 12:
            if atype == CTA_COUNTERS_PACKETS:
                packets = _BE64.unpack_from(data, at + 4)[0]
            elif atype == CTA_COUNTERS_BYTES:
                nbytes = _BE64.unpack_from(data, at + 4)[0]
        at += (length + 3) & ~3
    return packets, nbytes


def _entry(data: bytes, at: int, end: int) -> Entry | None:
    """One conntrack message's attributes (data[at:end]) as an entry; None if incomplete."""
    orig = reply = None
    op = ob = rp = rb = 0
    while at + 4 <= end:
        length, atype = _ATTR.unpack_from(data, at)
        if length < 4 or at + length > end:
            break
        atype &= 0x3FFF
        if atype == CTA_TUPLE_ORIG:
            orig = _tuple(data, at + 4, at + length)
        elif atype == CTA_TUPLE_REPLY:
            reply = _tuple(data, at + 4, at + length)
        elif atype == CTA_COUNTERS_ORIG:
            op, ob = _counts(data, at + 4, at + length)
        elif atype == CTA_COUNTERS_REPLY:
            rp, rb = _counts(data, at + 4, at + length)
        at += (length + 3) & ~3
    if orig is None or reply is None:
        return None
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
                entry = _entry(data, offset + _HDR.size + 4, end)
            except (struct.error, IndexError, ValueError):
                entry = None  # a malformed entry (never from a sane kernel): skipped
            if entry is not None:
                entries.append(entry)
        offset += (length + 3) & ~3
    return entries, False


def dump_request(family: int, seq: int = 1) -> bytes:
    body = struct.pack("=BBH", family, 0, 0)
    mtype = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET
    return nlmsg.message(mtype, NLM_F_REQUEST | NLM_F_DUMP, seq, body)


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
