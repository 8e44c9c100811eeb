"""The route table's view of netlink: a small protocol plus its kernel implementation.

Kept behind a protocol so the orchestration logic can be unit-tested with a fake kernel. Route
and neighbour writes and the resync's dumps go over one raw socket per thread, struct-encoded
(``calico.felix.routetable.rtnl``, ``calico.felix.nlbatch``): they are on the time-to-first-
response path. Only the rare single-link lookup still uses pyroute2, whose socket is bound to
the thread that opened it (pyroute2 0.9's sync API keeps per-thread asyncio state), so it is
reopened if a different thread starts calling.
"""

from __future__ import annotations

import errno
import logging
import socket
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from calico.felix.routetable.model import (
    MAIN_TABLE,
    RTN_UNICAST,
    RTPROT_KERNEL,
    KernelRoute,
    LinkInfo,
    cidr_addr,
)

if TYPE_CHECKING:
    from calico.felix.nlbatch import Request

log = logging.getLogger(__name__)

IFF_UP = 0x1
NUD_PERMANENT = 0x80


class RouteNetlinkError(OSError):
    """A netlink request failed; ``errno`` carries the kernel's error code."""


class RouteNetlink(Protocol):
    def list_links(self) -> list[LinkInfo]: ...

    def lookup_link(self, name: str) -> LinkInfo | None: ...

    def list_routes(self, ip_version: int) -> list[KernelRoute]: ...

    def replace_route(
        self, cidr: str, ifindex: int, *, proto: int, scope: int, metric: int
    ) -> None:
        """Add the route, replacing one with the same destination and metric."""
        ...

    def delete_route(self, route: KernelRoute) -> None: ...

    def set_neighbour(self, ip: str, mac: str, ifindex: int) -> None: ...

    def delete_neighbour(self, ip: str, ifindex: int) -> None: ...

    def close(self) -> None: ...


def _family(ip_version: int) -> int:
    return socket.AF_INET if ip_version == 4 else socket.AF_INET6


class PyRoute2Netlink:
    """:class:`RouteNetlink` over ``pyroute2.IPRoute``, optionally inside a named netns."""

    def __init__(self, netns: str | None = None) -> None:
        self._netns = netns
        self._ipr: Any = None
        self._owner: int | None = None
        self._dumper: Any = None  # calico.felix.nlbatch.BatchWriter: dumps and writes
        self._dumper_owner: int | None = None

    def _sock(self) -> Any:
        me = threading.get_ident()
        if self._ipr is not None and self._owner != me:
            self.close()
        if self._ipr is None:
            from pyroute2 import IPRoute

            kwargs: dict[str, Any] = {}
            if self._netns is not None:
                # flags=0: never create the namespace as a side effect of a typo.
                kwargs.update(netns=self._netns, flags=0)
            self._ipr = IPRoute(**kwargs)
            self._owner = me
        return self._ipr

    def _call(self, what: str, api: str, command: str, **kwargs: Any) -> Any:
        """``IPRoute.<api>(command, **kwargs)``; netlink and socket errors become
        :class:`RouteNetlinkError` naming ``what``."""
        from pyroute2 import NetlinkError

        fn = getattr(self._sock(), api)  # failing to open the socket is not a request error
        try:
            return fn(command, **kwargs)
        except NetlinkError as e:
            raise RouteNetlinkError(e.code, f"{what}: {e}") from e
        except OSError as e:
            # Socket-level trouble: drop the socket so the next call starts clean.
            self.close()
            raise RouteNetlinkError(e.errno or errno.EIO, f"{what}: {e}") from e

    def _dump(self, what: str, request: Any) -> list[tuple[int, bytes]]:
        """A dump through the struct codec (``calico.felix.nlbatch``): pyroute2's generic
        decoder made the resync's link and route dumps ~4% of a Felix cold start."""
        writer = self._writer()
        writer.connect()  # failing to open the socket is not a request error
        try:
            return writer.dump(request)
        except OSError as e:  # the writer has dropped its socket; the next dump reopens it
            raise RouteNetlinkError(e.errno or errno.EIO, f"{what}: {e}") from e

    def _writer(self) -> Any:
        """The thread's ``calico.felix.nlbatch.BatchWriter`` (dumps and writes share it)."""
        from calico.felix import nlbatch as nb

        me = threading.get_ident()
        if self._dumper is not None and self._dumper_owner != me:
            self._close_dumper()
        if self._dumper is None:
            self._dumper, self._dumper_owner = nb.BatchWriter(self._netns), me
        return self._dumper

    def _close_dumper(self) -> None:
        dumper, self._dumper, self._dumper_owner = self._dumper, None, None
        if dumper is not None:
            dumper.close()

    def list_links(self) -> list[LinkInfo]:
        from calico.felix import nlbatch as nb

        out = []
        for mtype, body in self._dump("dump links", nb.link_dump_request()):
            if mtype == nb.RTM_NEWLINK:
                link = nb.decode_link(body)
                out.append(LinkInfo(link.name, link.index, bool(link.flags & IFF_UP)))
        return out

    def lookup_link(self, name: str) -> LinkInfo | None:
        try:
            msgs = self._call(f"get link {name}", "link", "get", ifname=name)
        except RouteNetlinkError as e:
            if e.errno in (errno.ENODEV, errno.ENOENT):
                return None
            raise
        return _link_info(msgs[0]) if msgs else None

    def list_routes(self, ip_version: int) -> list[KernelRoute]:
        """Main-table routes we may manage: what :func:`_kernel_route` keeps of pyroute2's
        ``route("dump", family=..., table=254)``, decoded by ``calico.felix.nlbatch``."""
        from calico.felix import nlbatch as nb

        family = _family(ip_version)
        out = []
        for mtype, body in self._dump("dump routes", nb.route_dump_request(family)):
            if mtype == nb.RTM_NEWROUTE:
                route = _dumped_route(nb.decode_route(body), family)
                if route is not None:
                    out.append(route)
        return out

    def _write(self, build: Callable[[Any], Request]) -> None:
        """``build(calico.felix.routetable.rtnl)``'s request over the thread's struct socket,
        with its ack; a refusal or socket error becomes :class:`RouteNetlinkError` with the
        kernel's errno, as pyroute2's ``NetlinkError`` did."""
        from calico.felix.routetable import rtnl

        try:
            request = build(rtnl)
        except (ValueError, OSError) as e:  # an unparsable address or MAC: refused, as pyroute2
            raise RouteNetlinkError(errno.EINVAL, f"invalid request: {e}") from e
        writer = self._writer()
        writer.connect()  # failing to open the socket is not a request error
        failures = writer.send([request])
        if failures:
            code = failures[0].errno
            raise RouteNetlinkError(code, str(failures[0]))

    def replace_route(
        self, cidr: str, ifindex: int, *, proto: int, scope: int, metric: int
    ) -> None:
        self._write(
            lambda m: m.route_replace(cidr, ifindex, proto=proto, scope=scope, metric=metric)
        )

    def delete_route(self, route: KernelRoute) -> None:
        r = route
        self._write(
            lambda m: m.route_delete(
                r.cidr, r.ifindex, proto=r.proto, scope=r.scope, metric=r.metric
            )
        )

    def set_neighbour(self, ip: str, mac: str, ifindex: int) -> None:
        self._write(lambda m: m.neigh_replace(ip, mac, ifindex))

    def delete_neighbour(self, ip: str, ifindex: int) -> None:
        self._write(lambda m: m.neigh_delete(ip, ifindex))

    def close(self) -> None:
        self._close_dumper()
        ipr, self._ipr, self._owner = self._ipr, None, None
        if ipr is not None:
            try:
                ipr.close()
            except Exception:  # closing a half-broken socket must not mask the real error
                log.debug("ignoring error closing netlink socket", exc_info=True)


def _link_info(msg: Any) -> LinkInfo:
    return LinkInfo(
        name=msg.get("ifname") or msg.get_attr("IFLA_IFNAME"),
        index=msg["index"],
        admin_up=bool(msg["flags"] & IFF_UP),
    )


def _dumped_route(r: Any, family: int) -> KernelRoute | None:
    """:func:`_kernel_route` for a struct-decoded ``nlbatch.Route``: same filter, same fields
    (the header's table, RTA_OIF, RTA_DST or the family's default, RTA_PRIORITY or 0)."""
    from calico.felix import nlbatch as nb

    if r.family != family or r.rtype != RTN_UNICAST or r.proto == RTPROT_KERNEL:
        return None
    oif = r.attrs.get(nb.RTA_OIF)
    if oif is None or r.table != MAIN_TABLE:
        return None
    raw_dst = r.attrs.get(nb.RTA_DST)
    dst = nb.ip_text(raw_dst) if raw_dst else ("0.0.0.0" if family == socket.AF_INET else "::")
    cidr = f"{cidr_addr(f'{dst}/{r.dst_len}')}/{r.dst_len}"
    prio = r.attrs.get(nb.RTA_PRIORITY)
    return KernelRoute(
        cidr=cidr,
        ifindex=int.from_bytes(oif[:4], sys.byteorder),
        proto=r.proto,
        scope=r.scope,
        metric=int.from_bytes(prio[:4], sys.byteorder) if prio else 0,
    )


def _kernel_route(msg: Any) -> KernelRoute | None:
    """A cacheable route, or None for ones we never manage (kernel/non-unicast/multipath)."""
    if msg["type"] != RTN_UNICAST or msg["proto"] == RTPROT_KERNEL:
        return None
    oif = msg.get("oif")
    if oif is None:  # multipath or blackhole-like; not a device route
        return None
    if msg.get("table") != MAIN_TABLE:
        return None
    dst = msg.get("dst")
    if dst is None:
        dst = "0.0.0.0" if msg["family"] == socket.AF_INET else "::"
    dst_len = msg["dst_len"]
    cidr = f"{cidr_addr(f'{dst}/{dst_len}')}/{dst_len}"
    return KernelRoute(
        cidr=cidr,
        ifindex=oif,
        proto=msg["proto"],
        scope=msg["scope"],
        metric=msg.get("priority") or 0,
    )
