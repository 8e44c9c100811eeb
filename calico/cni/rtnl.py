"""A minimal rtnetlink client on the standard library's ``AF_NETLINK`` socket, for the plugin.

Why not pyroute2: the plugin is exec'd once per pod start and importing pyroute2 costs ~100 ms
of CPU (it loads asyncio and every message family), more than all the kernel work of an ADD.
This module encodes just the messages an ADD, DEL and CHECK send (veth pair, link up/down and
delete, addresses, routes, link and address dumps) with :mod:`struct`, and decodes the replies'
few attributes it reads. One :class:`RTNL` is one socket; a socket stays in the network
namespace it was created in, so one socket per namespace serves a whole call. The message
header, attributes and datagram walk are :mod:`calico.nlmsg`'s, shared with Felix's raw
sockets, in its strict mode: a malformed reply raises ``ValueError``.

Errors from the kernel raise :class:`NetlinkError`, an ``OSError`` whose ``errno`` (and
``code``, as pyroute2 names it) is the kernel's error number.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import struct
from typing import NamedTuple

from calico import nlmsg
from calico.nlmsg import NLM_F_ACK, NLM_F_MULTI, NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERROR

NETLINK_ROUTE = 0
# Message types.
RTM_NEWLINK = 16
RTM_DELLINK = 17
RTM_GETLINK = 18
RTM_NEWADDR = 20
RTM_GETADDR = 22
RTM_NEWROUTE = 24
RTM_GETROUTE = 26
# Header flags.
NLM_F_DUMP = 0x300
NLM_F_EXCL = 0x200
NLM_F_CREATE = 0x400
# Link attributes.
IFLA_ADDRESS = 1
IFLA_IFNAME = 3
IFLA_MTU = 4
IFLA_LINKINFO = 18
IFLA_NET_NS_FD = 28
IFLA_NUM_TX_QUEUES = 31
IFLA_NUM_RX_QUEUES = 32
IFLA_INFO_KIND = 1
IFLA_INFO_DATA = 2
VETH_INFO_PEER = 1
IFF_UP = 0x1
# Address attributes.
IFA_ADDRESS = 1
IFA_LOCAL = 2
IFA_F_NODAD = 0x02
# Route attributes and values (what pyroute2 0.9 sends for "route add": proto static).
RTA_DST = 1
RTA_OIF = 4
RTA_GATEWAY = 5
RT_TABLE_MAIN = 254
RTPROT_STATIC = 4
RT_SCOPE_UNIVERSE = 0
RT_SCOPE_LINK = 253
RTN_UNICAST = 1

_IFINFOMSG = struct.Struct("=BxHiII")  # family, type, index, flags, change
_IFADDRMSG = struct.Struct("=BBBBI")  # family, prefixlen, flags, scope, index
# family, dst_len, src_len, tos, table, protocol, scope, type, flags
_RTMSG = struct.Struct("=BBBBBBBBI")
_U32 = struct.Struct("=I")
_RECV_SIZE = 1 << 16


class NetlinkError(OSError):
    """The kernel refused a request; ``code`` is its errno (pyroute2's attribute name)."""

    def __init__(self, code: int, what: str = "") -> None:
        super().__init__(code, f"{what}: {os.strerror(code)}" if what else os.strerror(code))
        self.code = code


attr = nlmsg.attr


def attr_str(kind: int, text: str) -> bytes:
    return attr(kind, text.encode() + b"\0")


def attr_u32(kind: int, value: int) -> bytes:
    return attr(kind, _U32.pack(value))


def parse_attrs(data: bytes, offset: int = 0) -> dict[int, bytes]:
    """The rtattrs of a message body from ``offset``, by type (the last one wins; nested ones
    stay raw); a malformed one raises ``ValueError``."""
    return nlmsg.parse_attrs(data, offset, strict=True)


def _mac(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)


def _mac_bytes(text: str) -> bytes:
    return bytes(int(part, 16) for part in text.split(":"))


class Link(NamedTuple):
    index: int
    name: str
    up: bool
    mac: str


class Route(NamedTuple):
    dst: str  # "" for a default route
    dst_len: int
    oif: int | None


class RTNL:
    """One NETLINK_ROUTE socket in the current thread's network namespace."""

    def __init__(self) -> None:
        self.sock = socket.socket(
            socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, NETLINK_ROUTE
        )
        try:
            self.sock.bind((0, 0))
        except BaseException:
            self.sock.close()
            raise
        self._seq = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RTNL:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport -------------------------------------------------------------------------

    def request(
        self, kind: int, flags: int, body: bytes, what: str = ""
    ) -> list[tuple[int, bytes]]:
        """Send one message; return the replies' (type, body) until its ACK or DONE."""
        self._seq += 1
        seq = self._seq
        self.sock.send(nlmsg.message(kind, NLM_F_REQUEST | flags, seq, body))
        replies: list[tuple[int, bytes]] = []
        while True:
            for mtype, mflags, mseq, payload in nlmsg.split(self.sock.recv(_RECV_SIZE), True):
                if mseq != seq:
                    continue  # a stale reply to an earlier request
                if mtype == NLMSG_ERROR:
                    code = nlmsg.error_code(payload)
                    if code:
                        raise NetlinkError(code, what)
                    return replies  # the ACK
                if mtype == NLMSG_DONE:
                    return replies
                replies.append((mtype, payload))
                if not mflags & NLM_F_MULTI and not flags & NLM_F_ACK:
                    return replies

    # -- links -----------------------------------------------------------------------------

    @staticmethod
    def _link(payload: bytes) -> Link:
        _family, _type, index, flags, _change = _IFINFOMSG.unpack_from(payload)
        attrs = parse_attrs(payload, _IFINFOMSG.size)
        name = attrs.get(IFLA_IFNAME, b"").split(b"\0", 1)[0].decode()
        return Link(index, name, bool(flags & IFF_UP), _mac(attrs.get(IFLA_ADDRESS, b"")))

    def link_by_name(self, name: str) -> Link | None:
        body = _IFINFOMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0) + attr_str(IFLA_IFNAME, name)
        try:
            replies = self.request(RTM_GETLINK, 0, body, f"get link {name}")
        except NetlinkError as exc:
            if exc.code == errno.ENODEV:
                return None
            raise
        return self._link(replies[0][1]) if replies else None

    def link_index(self, name: str) -> int | None:
        link = self.link_by_name(name)
        return link.index if link else None

    def link_by_index(self, index: int) -> Link | None:
        body = _IFINFOMSG.pack(socket.AF_UNSPEC, 0, index, 0, 0)
        try:
            replies = self.request(RTM_GETLINK, 0, body, f"get link {index}")
        except NetlinkError as exc:
            if exc.code == errno.ENODEV:
                return None
            raise
        return self._link(replies[0][1]) if replies else None

    def link_delete(self, index: int) -> None:
        body = _IFINFOMSG.pack(socket.AF_UNSPEC, 0, index, 0, 0)
        self.request(RTM_DELLINK, NLM_F_ACK, body, f"delete link {index}")

    def link_up(self, index: int) -> None:
        body = _IFINFOMSG.pack(socket.AF_UNSPEC, 0, index, IFF_UP, IFF_UP)
        self.request(RTM_NEWLINK, NLM_F_ACK, body, f"set link {index} up")

    def veth_add(
        self,
        name: str,
        mac: str,
        peer: str,
        peer_netns_fd: int,
        mtu: int = 0,
        num_queues: int = 1,
    ) -> None:
        """Create ``name`` here with its peer ``peer`` directly inside the netns of the fd."""
        common = b""
        if mtu:
            common += attr_u32(IFLA_MTU, mtu)
        if num_queues > 1:
            common += attr_u32(IFLA_NUM_TX_QUEUES, num_queues)
            common += attr_u32(IFLA_NUM_RX_QUEUES, num_queues)
        peer_msg = (
            _IFINFOMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0)
            + attr_str(IFLA_IFNAME, peer)
            + attr_u32(IFLA_NET_NS_FD, peer_netns_fd)
            + common
        )
        linkinfo = attr(IFLA_INFO_KIND, b"veth") + attr(
            IFLA_INFO_DATA, attr(VETH_INFO_PEER, peer_msg)
        )
        body = (
            _IFINFOMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0)
            + attr_str(IFLA_IFNAME, name)
            + attr(IFLA_ADDRESS, _mac_bytes(mac))
            + common
            + attr(IFLA_LINKINFO, linkinfo)
        )
        self.request(RTM_NEWLINK, NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, body, f"add veth {name}")

    # -- addresses -------------------------------------------------------------------------

    def addr_add(self, index: int, ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
                 prefixlen: int, nodad: bool = False) -> None:  # fmt: skip
        family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
        flags = IFA_F_NODAD if nodad else 0
        body = _IFADDRMSG.pack(family, prefixlen, flags, RT_SCOPE_UNIVERSE, index)
        if ip.version == 4:  # as pyroute2 and iproute2: IPv4 sets the local address too
            body += attr(IFA_LOCAL, ip.packed)
        body += attr(IFA_ADDRESS, ip.packed)  # IPv6 with both would also set a peer address
        self.request(RTM_NEWADDR, NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, body, f"add {ip}")

    def addrs(self, index: int, family: int = socket.AF_UNSPEC) -> list[tuple[str, int]]:
        """(address, prefix length) of every address on link ``index``."""
        body = _IFADDRMSG.pack(family, 0, 0, 0, 0)
        out: list[tuple[str, int]] = []
        for _mtype, payload in self.request(RTM_GETADDR, NLM_F_DUMP, body, "dump addresses"):
            _fam, prefixlen, _flags, _scope, idx = _IFADDRMSG.unpack_from(payload)
            if idx != index:
                continue
            attrs = parse_attrs(payload, _IFADDRMSG.size)
            raw = attrs.get(IFA_ADDRESS) or attrs.get(IFA_LOCAL)
            if raw:
                out.append((str(ipaddress.ip_address(raw)), prefixlen))
        return out

    # -- routes ----------------------------------------------------------------------------

    def route_add(self, dst: ipaddress.IPv4Network | ipaddress.IPv6Network, oif: int,
                  gateway: str = "", scope_link: bool = False) -> None:  # fmt: skip
        family = socket.AF_INET6 if dst.version == 6 else socket.AF_INET
        scope = RT_SCOPE_LINK if scope_link else RT_SCOPE_UNIVERSE
        body = _RTMSG.pack(
            family, dst.prefixlen, 0, 0, RT_TABLE_MAIN, RTPROT_STATIC, scope, RTN_UNICAST, 0
        )
        if dst.prefixlen:
            body += attr(RTA_DST, dst.network_address.packed)
        if gateway:
            body += attr(RTA_GATEWAY, ipaddress.ip_address(gateway).packed)
        body += attr_u32(RTA_OIF, oif)
        self.request(RTM_NEWROUTE, NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, body, f"add route {dst}")

    def routes(self, family: int) -> list[Route]:
        """Every route of the main table for ``family``."""
        body = _RTMSG.pack(family, 0, 0, 0, 0, 0, 0, 0, 0)
        out: list[Route] = []
        for _mtype, payload in self.request(RTM_GETROUTE, NLM_F_DUMP, body, "dump routes"):
            _fam, dst_len, _s, _t, table, _p, _sc, _ty, _f = _RTMSG.unpack_from(payload)
            if table != RT_TABLE_MAIN:
                continue
            attrs = parse_attrs(payload, _RTMSG.size)
            dst = str(ipaddress.ip_address(attrs[RTA_DST])) if RTA_DST in attrs else ""
            oif = _U32.unpack(attrs[RTA_OIF])[0] if RTA_OIF in attrs else None
            out.append(Route(dst, dst_len, oif))
        return out
