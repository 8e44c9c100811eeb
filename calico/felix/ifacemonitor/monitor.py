"""``InterfaceMonitor``: an owned thread that follows link and address changes over netlink.

The thread runs its own asyncio loop around pyroute2's ``AsyncIPRoute`` subscribed to
RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR. It subscribes *before* dumping links and
addresses, so nothing falls between the dump and the first event; the dump is reported through
the change-only tracker and then ``on_in_sync`` fires once. Any socket error (including overflow)
tears the session down and starts a new one with a fresh dump, and a periodic re-dump
(InterfaceRefreshInterval) repairs anything missed silently. Callbacks run on the monitor thread;
consumers should hand them to their own thread (e.g. via a queue).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from calico.felix.ifacemonitor.state import AddrsCallback, IfaceTracker, LinkFact, StateCallback

log = logging.getLogger(__name__)

RTMGRP_LINK = 0x1
RTMGRP_IPV4_IFADDR = 0x10
RTMGRP_IPV6_IFADDR = 0x100
IFF_UP = 0x1
IFF_RUNNING = 0x40

DEFAULT_RESYNC_INTERVAL = 90.0  # InterfaceRefreshInterval


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
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._lock = threading.Lock()
        self.sessions = 0  # netlink sessions opened (observability; >1 means we recovered)

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("InterfaceMonitor already started")
        self._thread = threading.Thread(target=self._run, name="iface-monitor", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread and wait for it. Idempotent; a no-op before start(). Single-use."""
        if self._thread is None:
            return
        self._stop.set()
        with self._lock:
            loop, task = self._loop, self._task
        if loop is not None and task is not None:
            # RuntimeError = loop already closed: the thread is on its way out anyway.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(task.cancel)
        if self._thread is not None:
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
            asyncio.run(self._main())
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("interface monitor thread died")

    async def _main(self) -> None:
        with self._lock:
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
        while not self._stop.is_set():
            try:
                await self._session()
            except asyncio.CancelledError:
                return
            except Exception as e:
                log.warning("interface monitor netlink session failed (%s); resyncing", e)
                try:
                    await asyncio.sleep(self._retry_delay)
                except asyncio.CancelledError:
                    return

    async def _session(self) -> None:
        from pyroute2 import AsyncIPRoute

        kwargs: dict[str, Any] = {}
        if self._netns is not None:
            kwargs.update(netns=self._netns, flags=0)
        self.sessions += 1
        async with AsyncIPRoute(**kwargs) as ipr:
            await ipr.bind(groups=RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR)
            await self._resync(ipr)
            loop = asyncio.get_running_loop()
            next_resync = loop.time() + self._resync_interval
            while True:
                try:
                    async with asyncio.timeout_at(next_resync):
                        got_any = False
                        async for msg in ipr.get():
                            got_any = True
                            self._handle(msg)
                        if not got_any:
                            raise ConnectionError("netlink socket closed")
                except TimeoutError:
                    await self._resync(ipr)
                    next_resync = loop.time() + self._resync_interval

    async def _resync(self, ipr: Any) -> None:
        links: dict[int, LinkFact] = {}
        async for msg in await ipr.link("dump"):
            links[msg["index"]] = LinkFact(name=_ifname(msg), up=_is_up(msg))
        addrs: dict[int, set[str]] = {}
        async for msg in await ipr.addr("dump"):
            addr = _addr(msg)
            if addr is not None:
                addrs.setdefault(msg["index"], set()).add(addr)
        self._tracker.snapshot(links, addrs)
        if not self._in_sync.is_set():
            self._in_sync.set()
            if self._on_in_sync is not None:
                try:
                    self._on_in_sync()
                except Exception:
                    log.exception("on_in_sync callback failed")

    def _handle(self, msg: Any) -> None:
        event = msg.get("event")
        if event == "RTM_NEWLINK":
            self._tracker.link_update(msg["index"], _ifname(msg), _is_up(msg))
        elif event == "RTM_DELLINK":
            self._tracker.link_deleted(msg["index"])
        elif event in ("RTM_NEWADDR", "RTM_DELADDR"):
            addr = _addr(msg)
            if addr is None:
                return
            if event == "RTM_NEWADDR":
                self._tracker.addr_added(msg["index"], addr)
            else:
                self._tracker.addr_removed(msg["index"], addr)


def _ifname(msg: Any) -> str:
    return msg.get("ifname") or msg.get_attr("IFLA_IFNAME") or f"if{msg['index']}"


def _is_up(msg: Any) -> bool:
    """Oper-up: admin up *and* IFF_RUNNING (carrier), which is what workload handling needs."""
    flags = msg["flags"]
    return bool(flags & IFF_UP) and bool(flags & IFF_RUNNING)


def _addr(msg: Any) -> str | None:
    # IFA_LOCAL is the local address on point-to-point links; IFA_ADDRESS elsewhere.
    return msg.get_attr("IFA_LOCAL") or msg.get_attr("IFA_ADDRESS")
