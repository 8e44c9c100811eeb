"""A small nfnetlink_log (NFLOG) reader over a stdlib netlink socket.

Why not pyroute2: it has no NFLOG support, and the reader needs only three things per packet
(group, prefix, the first bytes of the IP packet), so a direct socket is both smaller and
faster. ``parse_messages`` is pure (property-tested); ``NflogReader`` owns the socket.
Requests and their acks use :mod:`calico.nlmsg`; ``parse_messages`` walks the datagram in
place (offsets, no per-message body copy) because it is the collector's hot loop, and drops a
message cut short by the buffer's end.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import struct
from collections.abc import Iterable
from typing import NamedTuple

from calico import nlmsg
from calico.nlmsg import NLM_F_ACK, NLM_F_REQUEST, NLMSG_ERROR

log = logging.getLogger(__name__)

NETLINK_NETFILTER = 12
NFNL_SUBSYS_ULOG = 4
NFULNL_MSG_PACKET = 0
NFULNL_MSG_CONFIG = 1
NFULA_PAYLOAD = 9
NFULA_PREFIX = 10
NFULA_CFG_CMD = 1
NFULA_CFG_MODE = 2
NFULA_CFG_TIMEOUT = 4
NFULA_CFG_QTHRESH = 5
NFULNL_CFG_CMD_BIND = 1
NFULNL_COPY_PACKET = 2

_NLMSGHDR = struct.Struct("=IHHII")
_NLATTR = struct.Struct("=HH")
_PACKET_MSG = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET

RECV_SIZE = 65536
PROTO_NAMES = {1: "icmp", 6: "tcp", 17: "udp", 58: "icmp6", 132: "sctp"}


class FiveTuple(NamedTuple):
    """A packet's (or conntrack original direction's) 5-tuple; ports 0 when the L4 has none."""

    proto: int
    src: str
    dst: str
    sport: int
    dport: int


class NflogPacket(NamedTuple):
    """One logged packet (a NamedTuple: tens of thousands are built per second)."""

    group: int
    prefix: str
    tuple: FiveTuple
    length: int  # the IP packet's full length (from its header, not the truncated copy)


def parse_ip(payload: bytes) -> tuple[FiveTuple, int] | None:
    """(5-tuple, total length) of an IPv4/IPv6 packet's first bytes; None if unparseable."""
    if not payload:
        return None
    version = payload[0] >> 4
    if version == 4 and len(payload) >= 20:
        ihl = (payload[0] & 0x0F) * 4
        total = struct.unpack_from("!H", payload, 2)[0]
        proto = payload[9]
        src = socket.inet_ntop(socket.AF_INET, payload[12:16])
        dst = socket.inet_ntop(socket.AF_INET, payload[16:20])
        l4 = ihl
    elif version == 6 and len(payload) >= 40:
        total = struct.unpack_from("!H", payload, 4)[0] + 40
        proto = payload[6]
        src = socket.inet_ntop(socket.AF_INET6, payload[8:24])
        dst = socket.inet_ntop(socket.AF_INET6, payload[24:40])
        l4 = 40
    else:
        return None
    sport = dport = 0
    if proto in (6, 17, 132) and len(payload) >= l4 + 4:
        sport, dport = struct.unpack_from("!HH", payload, l4)
    return FiveTuple(proto, src, dst, sport, dport), total


def parse_messages(data: bytes) -> list[NflogPacket]:
    """Every NFLOG packet message in one netlink datagram (other messages are skipped)."""
    out: list[NflogPacket] = []
    offset, size = 0, len(data)
    unpack_hdr, unpack_attr = _NLMSGHDR.unpack_from, _NLATTR.unpack_from
    while offset + 16 <= size:
        length, mtype, _flags, _seq, _pid = unpack_hdr(data, offset)
        if length < 16 or offset + length > size:
            break
        end = offset + length
        if mtype == _PACKET_MSG and end >= offset + 20:
            group = (data[offset + 18] << 8) | data[offset + 19]
            prefix = ""
            parsed = None
            at = offset + 20
            while at + 4 <= end:  # the attributes, inline: this is the collector's hot loop
                nla_len, nla_type = unpack_attr(data, at)
                if nla_len < 4 or at + nla_len > end:
                    break
                nla_type &= 0x3FFF
                if nla_type == NFULA_PREFIX:
                    raw = data[at + 4 : at + nla_len]
                    prefix = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
                elif nla_type == NFULA_PAYLOAD:
                    parsed = parse_ip(data[at + 4 : at + nla_len])
                at += (nla_len + 3) & ~3
            if parsed is not None:
                out.append(NflogPacket(group, prefix, parsed[0], parsed[1]))
        offset += (length + 3) & ~3
    return out


_attr = nlmsg.attr


def config_message(group: int, attrs: Iterable[bytes], seq: int) -> bytes:
    """An NFULNL_MSG_CONFIG request for ``group`` carrying ``attrs`` (acked)."""
    body = struct.pack("=BB", socket.AF_UNSPEC, 0) + struct.pack("!H", group) + b"".join(attrs)
    mtype = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG
    return nlmsg.message(mtype, NLM_F_REQUEST | NLM_F_ACK, seq, body)


class NflogError(OSError):
    """An NFLOG group could not be bound (e.g. another process owns it)."""


class NflogReader:
    """Bound to some NFLOG groups of this network namespace; ``read`` blocks up to ``timeout``."""

    def __init__(self, groups: Iterable[int], *, copy_range: int = 80, rcvbuf: int = 4 << 20):
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.dropped = 0  # datagrams the kernel could not deliver (socket buffer full)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.sock.bind((0, 0))
            seq = 0
            for group in groups:
                for attr in (
                    _attr(NFULA_CFG_CMD, struct.pack("=B", NFULNL_CFG_CMD_BIND)),
                    _attr(NFULA_CFG_MODE, struct.pack("!IBB", copy_range, NFULNL_COPY_PACKET, 0)),
                    # Deliver within 50 ms or after 32 packets: prompt, yet batched under load.
                    _attr(NFULA_CFG_TIMEOUT, struct.pack("!I", 5)),
                    _attr(NFULA_CFG_QTHRESH, struct.pack("!I", 32)),
                ):
                    seq += 1
                    self._request(config_message(group, [attr], seq), group)
        except BaseException:
            self.sock.close()
            raise

    def _request(self, msg: bytes, group: int) -> None:
        self.sock.send(msg)
        while True:
            for mtype, _flags, _seq, body in nlmsg.split(self.sock.recv(65536)):
                if mtype != NLMSG_ERROR:
                    continue  # a packet raced the ack: the reader drops it
                code = nlmsg.error_code(body)
                if code:
                    hint = ""
                    if code in (errno.EPERM, errno.EBUSY):  # the kernel's answer when bound
                        hint = " (is another NFLOG reader bound to it in this namespace?)"
                    raise NflogError(code, f"NFLOG group {group}: {os.strerror(code)}{hint}")
                return

    def read(self, timeout: float) -> list[NflogPacket]:
        # A zero timeout would make the socket non-blocking (EAGAIN instead of a timeout).
        self.sock.settimeout(max(timeout, 0.001))
        try:
            # The kernel batches into datagrams of at most its nlbufsiz (8 KiB by default).
            data = self.sock.recv(RECV_SIZE)
        except (TimeoutError, BlockingIOError):
            return []
        except OSError as e:
            if e.errno == errno.ENOBUFS:
                self.dropped += 1
                return []
            raise
        return parse_messages(data)

    def close(self) -> None:
        self.sock.close()
