"""``InterfaceMonitor``: an owned thread that follows link and address changes over netlink.

The thread holds a raw NETLINK_ROUTE socket subscribed to RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR and
RTNLGRP_IPV6_IFADDR. It subscribes *before* dumping links and addresses (the dumps go over a
second socket, :class:`calico.felix.nlbatch.BatchWriter`), so nothing falls between the dump
and the first event: an event from before the dump is still queued on the subscribed socket
and is applied after the snapshot, which the change-only tracker absorbs. The dump is reported
through the tracker and then ``on_in_sync`` fires once. Any socket error (including overflow,
ENOBUFS) tears the session down and starts a new one with a fresh dump, and a periodic re-dump
(InterfaceRefreshInterval) repairs anything missed silently. Callbacks run on the monitor
thread; consumers should hand them to their own thread (e.g. via a queue).

Why not pyroute2's ``AsyncIPRoute`` (what this used): importing pyroute2 and asyncio was
~0.2 s CPU of every Felix start, for three message shapes ``struct`` decodes
(design/performance.md "Cold start: dataclasses and imports").
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Callable

from calico.felix.ifacemonitor.state import AddrsCallback, IfaceTracker, LinkFact, StateCallback
from calico.felix.nlbatch import (
    NLM_F_DUMP,
    RTM_NEWLINK,
    SOL_NETLINK,
    BatchWriter,
    Request,
    decode_link,
    link_dump_request,
    open_rtnl_socket,
)
from calico.nlmsg import NLMSG_DONE, NLMSG_ERROR, error_code, parse_attrs, split

log = logging.getLogger(__name__)

# Multicast groups (RTNLGRP_*, for NETLINK_ADD_MEMBERSHIP; the RTMGRP_* masks are 1 << (n - 1)).
RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR = 1, 5, 9
NETLINK_ADD_MEMBERSHIP = 1
RTM_DELLINK, RTM_NEWADDR, RTM_DELADDR, RTM_GETADDR = 17, 20, 21, 22
IFA_ADDRESS, IFA_LOCAL = 1, 2
IFF_UP = 0x1
IFF_RUNNING = 0x40
_IFADDRMSG = struct.Struct("=BBBBI")  # family, prefixlen, flags, scope, index
RECV_BUFFER = 1 << 20

DEFAULT_RESYNC_INTERVAL = 90.0  # InterfaceRefreshInterval


def addr_dump_request() -> Request:
    """Every address of every family (AF_UNSPEC), as pyroute2's ``addr("dump")`` asked."""
    return Request("dump addresses", RTM_GETADDR, NLM_F_DUMP, _IFADDRMSG.pack(0, 0, 0, 0, 0))


def decode_addr(body: bytes) -> tuple[int, str | None]:
    """(ifindex, address text) of an ifaddrmsg; IFA_LOCAL is the local address on
    point-to-point links, IFA_ADDRESS elsewhere. Text as ``inet_ntop`` writes it."""
    family, _, _, _, index = _IFADDRMSG.unpack_from(body, 0)
    attrs = parse_attrs(body, _IFADDRMSG.size)
    raw = attrs.get(IFA_LOCAL) or attrs.get(IFA_ADDRESS)
    if not raw:
        return index, None
    try:
        return index, socket.inet_ntop(family, raw)
    except (OSError, ValueError):  # not AF_INET/AF_INET6, or a malformed length
        return index, None


def link_fact(body: bytes) -> tuple[int, LinkFact]:
    """(ifindex, name and oper-up) of an ifinfomsg. Oper-up is admin up *and* IFF_RUNNING
    (carrier), which is what workload handling needs; a link without a name is ``if<index>``."""
    link = decode_link(body)
    up = bool(link.flags & IFF_UP) and bool(link.flags & IFF_RUNNING)
    return link.index, LinkFact(name=link.name or f"if{link.index}", up=up)


class InterfaceMonitor:
    def __init__(
        self,
        on_iface_state: StateCallback,
        on_iface_addrs: AddrsCallback,
        *,
        netns: str | None = None,
        on_in_sync: Callable[[], None] | None = None,
        resync_interval: float = DEFAULT_RESYNC_INTERVAL,
        retry_delay: float = 1.0,
    ) -> None:
        self._tracker = IfaceTracker(on_iface_state, on_iface_addrs)
        self._netns = netns
        self._on_in_sync = on_in_sync
        self._resync_interval = resync_interval
        self._retry_delay = retry_delay
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._in_sync = threading.Event()
        self._wake_r = self._wake_w = -1  # a pipe (from start()) whose write wakes the select
        self.sessions = 0  # netlink sessions opened (observability; >1 means we recovered)

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("InterfaceMonitor already started")
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="iface-monitor", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread and wait for it. Idempotent; a no-op before start(). Single-use."""
        if self._thread is None:
            return
        if not self._stop.is_set():
            self._stop.set()
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.error("interface monitor thread did not stop within %.1fs", timeout)

    @property
    def in_sync(self) -> bool:
        return self._in_sync.is_set()

    def wait_in_sync(self, timeout: float | None = None) -> bool:
        return self._in_sync.wait(timeout)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # --- thread body --------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self._session()
                except Exception as e:  # socket errors, overflow (ENOBUFS), a bad message
                    log.warning("interface monitor netlink session failed (%s); resyncing", e)
                    self._stop.wait(self._retry_delay)
        except Exception:
            log.exception("interface monitor thread died")
        finally:
            for fd in (self._wake_r, self._wake_w):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _session(self) -> None:
        """One subscription: dump, then events until stopped (return) or a socket error."""
        self.sessions += 1
        events = open_rtnl_socket(self._netns)
        dumper = BatchWriter(self._netns)
        try:
            events.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECV_BUFFER)
            for group in (RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR):
                events.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, group)
            self._resync(dumper)
            next_resync = time.monotonic() + self._resync_interval
            while not self._stop.is_set():
                wait = max(0.0, next_resync - time.monotonic())
                ready, _, _ = select.select([events, self._wake_r], [], [], wait)
                if self._stop.is_set():
                    return
                if events in ready:
                    data = events.recv(RECV_BUFFER)
                    if not data:
                        raise OSError(errno.ECONNRESET, "netlink socket closed")
                    for mtype, _flags, _seq, body in split(data):
                        self._handle(mtype, body)
                if time.monotonic() >= next_resync:
                    self._resync(dumper)
                    next_resync = time.monotonic() + self._resync_interval
        finally:
            events.close()
            dumper.close()

    def _resync(self, dumper: BatchWriter) -> None:
        links: dict[int, LinkFact] = {}
        for mtype, body in dumper.dump(link_dump_request()):
            if mtype == RTM_NEWLINK:
                index, fact = link_fact(body)
                links[index] = fact
        addrs: dict[int, set[str]] = {}
        for mtype, body in dumper.dump(addr_dump_request()):
            if mtype == RTM_NEWADDR:
                index, addr = decode_addr(body)
                if addr is not None:
                    addrs.setdefault(index, set()).add(addr)
        self._tracker.snapshot(links, addrs)
        if not self._in_sync.is_set():
            self._in_sync.set()
            if self._on_in_sync is not None:
                try:
                    self._on_in_sync()
                except Exception:
                    log.exception("on_in_sync callback failed")

    def _handle(self, mtype: int, body: bytes) -> None:
        if mtype == RTM_NEWLINK:
            index, fact = link_fact(body)
            self._tracker.link_update(index, fact.name, fact.up)
        elif mtype == RTM_DELLINK:
            index, _ = link_fact(body)
            self._tracker.link_deleted(index)
        elif mtype in (RTM_NEWADDR, RTM_DELADDR):
            index, addr = decode_addr(body)
            if addr is None:
                return
            if mtype == RTM_NEWADDR:
                self._tracker.addr_added(index, addr)
            else:
                self._tracker.addr_removed(index, addr)
        elif mtype == NLMSG_ERROR:
            code = error_code(body)
            if code:
                raise OSError(code, f"netlink error on the event socket: {os.strerror(code)}")
        elif mtype != NLMSG_DONE:
            log.debug("interface monitor: ignoring netlink message type %d", mtype)
