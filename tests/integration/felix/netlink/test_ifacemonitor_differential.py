"""The interface monitor's struct decoding (``calico.felix.ifacemonitor.monitor``) against
pyroute2's messages read the way the monitor read them before (``ifname`` or IFLA_IFNAME or
``if<index>``; admin up and IFF_RUNNING; IFA_LOCAL or IFA_ADDRESS), for links of several kinds
(veths up, admin down and without carrier, a bridge and its ports, which also send AF_BRIDGE
link messages, a rename), point-to-point addresses (IFA_LOCAL differs from IFA_ADDRESS), IPv4
and IPv6 addresses and deletions: the same dump snapshot, and event streams that drive the
tracker to the same callbacks. The raw streams differ in one way: pyroute2 reported fewer of
the bridge's own RTM_NEWLINK repeats while a port was enslaved (same state each time), so its
stream is checked to be a subsequence of ours."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import threading
from typing import Any

import pytest
from nlns import NS, add_veth, wait_for
from pyroute2 import AsyncIPRoute

from calico.felix.ifacemonitor.monitor import (
    NETLINK_ADD_MEMBERSHIP,
    RTM_DELADDR,
    RTM_DELLINK,
    RTM_NEWADDR,
    RTNLGRP_IPV4_IFADDR,
    RTNLGRP_IPV6_IFADDR,
    RTNLGRP_LINK,
    InterfaceMonitor,
    addr_dump_request,
    decode_addr,
    link_fact,
)
from calico.felix.ifacemonitor.state import IfaceTracker, LinkFact
from calico.felix.nlbatch import RTM_NEWLINK, SOL_NETLINK, BatchWriter, open_rtnl_socket
from calico.nlmsg import split

pytestmark = pytest.mark.root

IFF_UP, IFF_RUNNING = 0x1, 0x40
EVENT_TYPES = {"RTM_NEWLINK": RTM_NEWLINK, "RTM_DELLINK": RTM_DELLINK,
               "RTM_NEWADDR": RTM_NEWADDR, "RTM_DELADDR": RTM_DELADDR}  # fmt: skip


def old_link(msg: Any) -> tuple[int, LinkFact]:
    name = msg.get("ifname") or msg.get_attr("IFLA_IFNAME") or f"if{msg['index']}"
    flags = msg["flags"]
    return msg["index"], LinkFact(name, bool(flags & IFF_UP) and bool(flags & IFF_RUNNING))


def old_addr(msg: Any) -> tuple[int, str | None]:
    return msg["index"], msg.get_attr("IFA_LOCAL") or msg.get_attr("IFA_ADDRESS")


def old_event(msg: Any) -> tuple[Any, ...]:
    kind = EVENT_TYPES[msg["event"]]
    if kind in (RTM_NEWLINK, RTM_DELLINK):
        return (kind, *old_link(msg))
    return (kind, *old_addr(msg))


def new_event(mtype: int, body: bytes) -> tuple[Any, ...]:
    if mtype in (RTM_NEWLINK, RTM_DELLINK):
        return (mtype, *link_fact(body))
    return (mtype, *decode_addr(body))


def tracked(events: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The callbacks an ``IfaceTracker`` fed ``events`` makes: what the dataplane sees."""
    out: list[tuple[Any, ...]] = []
    tracker = IfaceTracker(lambda *a: out.append(("state", *a)), lambda *a: out.append(a))
    for kind, index, value in list(events):
        if kind == RTM_NEWLINK:
            tracker.link_update(index, value.name, value.up)
        elif kind == RTM_DELLINK:
            tracker.link_deleted(index)
        elif value is not None:
            (tracker.addr_added if kind == RTM_NEWADDR else tracker.addr_removed)(index, value)
    return out


def is_subsequence(short: list[Any], long: list[Any]) -> bool:
    it = iter(long)
    return all(any(x == y for y in it) for x in short)


def make_links(host: NS) -> None:
    add_veth(host, "caliup", None, "peerup")
    host.ip("link", "set", "peerup", "up")  # caliup: up with carrier
    host.ip("link", "add", "calidown", "type", "veth", "peer", "name", "peerdown")  # admin down
    host.ip("link", "add", "calinoc", "type", "veth", "peer", "name", "peernoc")
    host.ip("link", "set", "calinoc", "up")  # admin up, no carrier
    host.ip("link", "add", "br0", "type", "bridge")
    host.ip("link", "set", "peerup", "master", "br0")
    host.ip("link", "set", "br0", "up")
    host.ip("link", "add", "dum0", "type", "veth", "peer", "name", "dumpeer")
    host.ip("link", "set", "dum0", "up")
    host.ip("addr", "add", "10.71.0.1/24", "dev", "caliup")
    host.ip("addr", "add", "10.72.0.1", "peer", "10.72.0.2", "dev", "dum0")  # IFA_LOCAL
    host.ip("-6", "addr", "add", "fd00:71::1/64", "dev", "caliup", "nodad")
    host.ip("-6", "addr", "add", "fd00:72::1", "peer", "fd00:72::2", "dev", "dum0", "nodad")
    host.ip("link", "set", "calidown", "name", "calirenamed")


def test_dump_snapshot_equals_pyroute2s(host: NS) -> None:
    make_links(host)
    old_links = dict(old_link(m) for m in host.ipr.link("dump"))
    old_addrs: dict[int, set[str]] = {}
    for m in host.ipr.addr("dump"):
        index, addr = old_addr(m)
        if addr is not None:
            old_addrs.setdefault(index, set()).add(addr)
    dumper = BatchWriter(host.name)
    try:
        snaps: list[tuple[dict[int, LinkFact], dict[int, set[str]]]] = []
        probe = InterfaceMonitor(lambda *a: None, lambda *a: None)
        probe._tracker.snapshot = lambda links, addrs: snaps.append((links, addrs))  # type: ignore[method-assign]
        probe._resync(dumper)
        raw_addrs = dumper.dump(addr_dump_request())
    finally:
        dumper.close()
    links, addrs = snaps[0]
    assert links == old_links
    assert addrs == old_addrs
    assert {"caliup", "calirenamed", "calinoc", "br0", "dum0", "lo"} <= {
        f.name for f in links.values()
    }
    assert links[host.index("calinoc")].up is False and links[host.index("caliup")].up
    assert "10.72.0.1" in addrs[host.index("dum0")]  # the local end, not the peer
    assert "fd00:72::1" in addrs[host.index("dum0")]
    assert len(raw_addrs) == sum(len(a) for a in addrs.values())


class PyRoute2Events(threading.Thread):
    """pyroute2's ``AsyncIPRoute`` subscribed as the monitor subscribed it before."""

    def __init__(self, host: NS) -> None:
        super().__init__(daemon=True)
        self.netns = host.name
        self.seen: list[tuple[Any, ...]] = []
        self.bound = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[None] | None = None

    def run(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            asyncio.run(self.main())

    async def main(self) -> None:
        self.loop, self.task = asyncio.get_running_loop(), asyncio.current_task()
        async with AsyncIPRoute(netns=self.netns, flags=0) as ipr:
            await ipr.bind(groups=0x1 | 0x10 | 0x100)  # RTMGRP_LINK | IPV4_IFADDR | IPV6_IFADDR
            self.bound.set()
            while True:
                async for msg in ipr.get():
                    if msg.get("event") in EVENT_TYPES:
                        self.seen.append(old_event(msg))

    def stop(self) -> None:
        if self.loop is not None and self.task is not None:
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self.task.cancel)
        self.join(5)


def test_event_stream_equals_pyroute2s(host: NS) -> None:
    ours = open_rtnl_socket(host.name)
    for group in (RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR):
        ours.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, group)
    theirs = PyRoute2Events(host)
    theirs.start()
    assert theirs.bound.wait(10)
    seen: list[tuple[Any, ...]] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            if select.select([ours], [], [], 0.05)[0]:
                for mtype, _flags, _seq, body in split(ours.recv(1 << 20)):
                    if mtype in (RTM_NEWLINK, RTM_DELLINK, RTM_NEWADDR, RTM_DELADDR):
                        seen.append(new_event(mtype, body))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        make_links(host)
        host.ip("link", "set", "peernoc", "up")  # carrier arrives
        host.ip("addr", "del", "10.71.0.1/24", "dev", "caliup")
        host.ip("-6", "addr", "del", "fd00:72::1", "peer", "fd00:72::2", "dev", "dum0")
        host.ip("link", "set", "peerup", "nomaster")
        host.ip("link", "del", "calinoc")
        host.ip("link", "del", "br0")
        host.ip("link", "add", "sentinel0", "type", "veth", "peer", "name", "sentinel1")  # last
        last = host.index("sentinel0")

        def done(events: list[tuple[Any, ...]]) -> bool:
            return any(e[0] == RTM_NEWLINK and e[1] == last for e in events)

        assert wait_for(lambda: done(seen) and done(theirs.seen), timeout=10.0), (
            done(seen),
            done(theirs.seen),
            len(seen),
            len(theirs.seen),
            seen[-3:],
        )
        # The sentinel is the last change made: both streams end with its messages.
        wait_for(lambda: tracked(seen) == tracked(theirs.seen), timeout=5.0)
        assert tracked(seen) == tracked(theirs.seen)
        assert is_subsequence(theirs.seen, seen)  # nothing pyroute2 decoded is missed
        assert len(seen) > 20
        kinds = {e[0] for e in seen}
        assert kinds == {RTM_NEWLINK, RTM_DELLINK, RTM_NEWADDR, RTM_DELADDR}
    finally:
        stop.set()
        theirs.stop()
        reader.join(2)
        ours.close()


def test_a_monitor_never_started_holds_no_descriptors() -> None:
    before = len(os.listdir("/proc/self/fd"))
    mon = InterfaceMonitor(lambda *a: None, lambda *a: None)
    mon.stop()
    assert len(os.listdir("/proc/self/fd")) == before
