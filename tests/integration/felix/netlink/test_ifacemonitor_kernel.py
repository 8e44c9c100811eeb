"""InterfaceMonitor against real netlink events inside a throwaway namespace."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator

import pytest
from nlns import NS, add_veth, wait_for

from calico.felix.ifacemonitor import InterfaceMonitor
from calico.felix.routetable import RouteTable, RouteTarget

pytestmark = pytest.mark.root


class Seen:
    """Thread-safe record of callbacks, with the latest state per interface."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.states: dict[str, tuple[str, int]] = {}
        self.addrs: dict[str, set[str] | None] = {}
        self.events: queue.Queue[tuple] = queue.Queue()

    def on_state(self, name: str, state: str, index: int) -> None:
        with self.lock:
            self.states[name] = (state, index)
        self.events.put(("state", name, state, index))

    def on_addrs(self, name: str, addrs: set[str] | None) -> None:
        with self.lock:
            self.addrs[name] = addrs
        self.events.put(("addrs", name, addrs))

    def state(self, name: str) -> str | None:
        with self.lock:
            got = self.states.get(name)
        return got[0] if got else None

    def addr_set(self, name: str) -> set[str] | None:
        with self.lock:
            return self.addrs.get(name)


@pytest.fixture
def monitored(host: NS) -> Iterator[tuple[InterfaceMonitor, Seen]]:
    seen = Seen()
    mon = InterfaceMonitor(seen.on_state, seen.on_addrs, netns=host.name)
    mon.start()
    try:
        yield mon, seen
    finally:
        mon.stop()
        assert not mon.alive


def test_initial_dump_reports_in_sync(host: NS, monitored: tuple[InterfaceMonitor, Seen]) -> None:
    mon, seen = monitored
    assert mon.wait_in_sync(5.0)
    assert seen.state("lo") == "up"
    assert "10.99.0.1" in (seen.addr_set("lo") or set())


def test_up_down_address_and_deletion_events(
    host: NS, monitored: tuple[InterfaceMonitor, Seen]
) -> None:
    mon, seen = monitored
    assert mon.wait_in_sync(5.0)
    add_veth(host, "calimon1", peer_if="peermon1")  # host end up; peer still down
    assert wait_for(lambda: seen.state("calimon1") == "down")  # no carrier: not oper-up
    host.ip("link", "set", "peermon1", "up")
    assert wait_for(lambda: seen.state("calimon1") == "up")
    host.ip("addr", "add", "10.66.0.1/24", "dev", "calimon1")
    host.ip("addr", "add", "fd00:66::1/64", "dev", "calimon1", "nodad")
    assert wait_for(lambda: {"10.66.0.1", "fd00:66::1"} <= (seen.addr_set("calimon1") or set()))
    host.ip("addr", "del", "10.66.0.1/24", "dev", "calimon1")
    assert wait_for(lambda: "10.66.0.1" not in (seen.addr_set("calimon1") or set()))
    host.ip("link", "set", "calimon1", "down")
    assert wait_for(lambda: seen.state("calimon1") == "down")
    host.ip("link", "del", "calimon1")
    assert wait_for(lambda: seen.state("calimon1") == "absent")
    assert seen.addr_set("calimon1") is None


def test_stop_is_prompt_and_idempotent(host: NS) -> None:
    seen = Seen()
    mon = InterfaceMonitor(seen.on_state, seen.on_addrs, netns=host.name)
    mon.stop()  # before start: harmless
    mon.start()
    assert mon.wait_in_sync(5.0)
    t0 = time.monotonic()
    mon.stop()
    assert time.monotonic() - t0 < 1.0
    assert not mon.alive
    mon.stop()


def test_periodic_resync_runs_without_losing_state(host: NS) -> None:
    seen = Seen()
    mon = InterfaceMonitor(seen.on_state, seen.on_addrs, netns=host.name, resync_interval=0.2)
    mon.start()
    try:
        assert mon.wait_in_sync(5.0)
        add_veth(host, "caliresync")
        time.sleep(0.5)  # at least two re-dumps
        assert seen.state("caliresync") == "down"
        assert mon.sessions == 1  # re-dumps happen on the same subscription
    finally:
        mon.stop()


def test_monitor_feeds_route_table_for_late_interface(host: NS) -> None:
    """The intended wiring: callbacks go through a queue to the thread that owns the table."""
    updates: queue.Queue[tuple[str, str, int]] = queue.Queue()
    mon = InterfaceMonitor(
        lambda n, s, i: updates.put((n, s, i)), lambda n, a: None, netns=host.name
    )
    rt = RouteTable(netns=host.name)
    mon.start()
    try:
        assert mon.wait_in_sync(5.0)
        rt.set_routes("caliwired", [RouteTarget("10.65.9.1")])
        assert rt.apply().pending_ifaces == {"caliwired"}
        add_veth(host, "caliwired")
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            try:
                name, state, index = updates.get(timeout=0.1)
            except queue.Empty:
                continue
            rt.on_iface_state(name, state, index)
            if name == "caliwired":
                break
        res = rt.apply()
        assert res.ok and res.pending_ifaces == set()
        assert host.routes_on("caliwired") == {"10.65.9.1/32"}
    finally:
        mon.stop()
        rt.close()


class FlakyMonitor(InterfaceMonitor):
    """Fails its first dump the way an overflowed or broken socket would."""

    failures = 1

    def _resync(self, dumper) -> None:  # type: ignore[override]
        if self.failures:
            self.failures -= 1
            raise OSError(105, "No buffer space available")
        super()._resync(dumper)


def test_socket_error_leads_to_new_session_and_resync(host: NS) -> None:
    seen = Seen()
    mon = FlakyMonitor(seen.on_state, seen.on_addrs, netns=host.name, retry_delay=0.05)
    mon.start()
    try:
        assert mon.wait_in_sync(5.0)
        assert mon.sessions == 2
        add_veth(host, "califlaky")
        assert wait_for(lambda: seen.state("califlaky") == "down")
    finally:
        mon.stop()
