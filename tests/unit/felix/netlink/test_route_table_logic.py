"""RouteTable orchestration against an in-memory kernel and an injectable clock."""

from __future__ import annotations

import errno
import random

import pytest
from fake_route_netlink import FakeClock, FakeKernel

from calico.felix.routetable import RouteTable, RouteTarget


@pytest.fixture
def kernel() -> FakeKernel:
    return FakeKernel()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def make_table(kernel: FakeKernel, clock: FakeClock, **kw) -> RouteTable:
    return RouteTable(netlink=kernel, clock=clock, rng=random.Random(1), **kw)


def test_programs_routes_and_neighbours(kernel: FakeKernel, clock: FakeClock) -> None:
    kernel.add_link("cali1")
    rt = make_table(kernel, clock)
    rt.set_routes("cali1", [RouteTarget("10.0.0.1", "ee:ee:ee:00:00:01"), RouteTarget("fd00::1")])
    res = rt.apply()
    assert res.ok and res.resynced
    assert kernel.routes_on("cali1") == {"10.0.0.1/32", "fd00::1/128"}
    assert kernel.neigh == {("10.0.0.1", kernel.links["cali1"].index): "ee:ee:ee:00:00:01"}
    assert res.conntrack_flush_ips == set()  # a first add flushes nothing
    kernel.calls.clear()
    assert rt.apply().ok
    assert kernel.calls == []  # nothing dirty, no resync due: no kernel traffic at all


def test_stale_route_removed_only_after_grace(kernel: FakeKernel, clock: FakeClock) -> None:
    kernel.add_link("cali1")
    kernel.add_link("eth0")
    kernel.add_route("10.0.0.9/32", "cali1")  # e.g. left by the CNI plugin
    kernel.add_route("192.168.0.0/24", "eth0", proto=4)  # not ours: never touched
    rt = make_table(kernel, clock, grace_period=10.0)
    rt.apply()
    assert "10.0.0.9/32" in kernel.routes_on("cali1")
    assert rt.next_deadline() == pytest.approx(clock.now + 10.0)
    clock.advance(9.0)
    rt.apply()
    assert "10.0.0.9/32" in kernel.routes_on("cali1")
    clock.advance(1.0)
    res = rt.apply()
    assert kernel.routes_on("cali1") == set()
    assert res.removed_ips == {"10.0.0.9"}
    assert kernel.routes_on("eth0") == {"192.168.0.0/24"}


def test_route_no_longer_desired_waits_grace_from_last_desired(
    kernel: FakeKernel, clock: FakeClock
) -> None:
    kernel.add_link("cali1")
    rt = make_table(kernel, clock, grace_period=10.0)
    rt.set_routes("cali1", [RouteTarget("10.0.0.1"), RouteTarget("10.0.0.2")])
    rt.apply()
    clock.advance(60.0)
    rt.set_routes("cali1", [RouteTarget("10.0.0.1")])
    res = rt.apply()
    assert res.removed_ips == {"10.0.0.2"}  # reported when it stops being wanted
    assert kernel.routes_on("cali1") == {"10.0.0.1/32", "10.0.0.2/32"}
    clock.advance(10.0)
    rt.apply()
    assert kernel.routes_on("cali1") == {"10.0.0.1/32"}


def test_moved_ip_reported_and_route_follows(kernel: FakeKernel, clock: FakeClock) -> None:
    kernel.add_link("cali1")
    kernel.add_link("cali2")
    rt = make_table(kernel, clock)
    rt.set_routes("cali1", [RouteTarget("10.0.0.1")])
    rt.apply()
    rt.remove_iface("cali1")
    rt.set_routes("cali2", [RouteTarget("10.0.0.1")])
    res = rt.apply()
    assert res.moved_ips == {"10.0.0.1"} and res.removed_ips == set()
    assert kernel.routes_on("cali2") == {"10.0.0.1/32"}
    assert kernel.routes_on("cali1") == set()


def test_last_claimant_wins_and_previous_owner_takes_over(
    kernel: FakeKernel, clock: FakeClock
) -> None:
    kernel.add_link("cali1")
    kernel.add_link("cali2")
    rt = make_table(kernel, clock)
    rt.set_routes("cali1", [RouteTarget("10.0.0.1")])
    rt.set_routes("cali2", [RouteTarget("10.0.0.1")])
    rt.apply()
    assert kernel.routes_on("cali2") == {"10.0.0.1/32"}
    rt.remove_iface("cali2")
    res = rt.apply()
    assert kernel.routes_on("cali1") == {"10.0.0.1/32"}
    assert res.moved_ips == {"10.0.0.1"}


def test_missing_iface_is_deferred_until_it_appears(kernel: FakeKernel, clock: FakeClock) -> None:
    rt = make_table(kernel, clock)
    rt.set_routes("cali7", [RouteTarget("10.0.0.7")])
    res = rt.apply()
    assert res.ok and res.pending_ifaces == {"cali7"} and rt.has_pending_work
    kernel.add_link("cali7")
    res = rt.apply()  # looked up again without waiting for a resync
    assert res.pending_ifaces == set() and kernel.routes_on("cali7") == {"10.0.0.7/32"}


def test_iface_state_callbacks_drive_reprogramming(kernel: FakeKernel, clock: FakeClock) -> None:
    link = kernel.add_link("cali1")
    rt = make_table(kernel, clock)
    rt.set_routes("cali1", [RouteTarget("10.0.0.1")])
    rt.apply()
    kernel.del_link("cali1")
    rt.on_iface_state("cali1", "absent", link.index)
    assert rt.apply().pending_ifaces == {"cali1"}
    link = kernel.add_link("cali1")
    rt.on_iface_state("cali1", "up", link.index)
    rt.apply()
    assert kernel.routes_on("cali1") == {"10.0.0.1/32"}


def test_admin_down_iface_is_pending_not_an_error(kernel: FakeKernel, clock: FakeClock) -> None:
    kernel.add_link("cali1", up=False)
    rt = make_table(kernel, clock)
    rt.set_routes("cali1", [RouteTarget("10.0.0.1")])
    res = rt.apply()
    assert res.ok and res.pending_ifaces == {"cali1"}


def test_periodic_resync_repairs_drift(kernel: FakeKernel, clock: FakeClock) -> None:
    kernel.add_link("cali1")
    rt = make_table(kernel, clock, refresh_interval=90.0)
    rt.set_routes("cali1", [RouteTarget("10.0.0.1")])
    rt.apply()
    deadline = rt.next_deadline()
    assert deadline is not None and 81.0 <= deadline - clock.now <= 99.0  # 90 s +/- 10 %
    kernel.routes.clear()  # someone deleted it by hand
    rt.apply()
    assert kernel.routes_on("cali1") == set()  # cache trusted until the refresh is due
    clock.now = deadline
    assert rt.apply().resynced
    assert kernel.routes_on("cali1") == {"10.0.0.1/32"}


def test_netlink_error_triggers_resync_and_retry(kernel: FakeKernel, clock: FakeClock) -> None:
    kernel.add_link("cali1")
    rt = make_table(kernel, clock)
    rt.apply()
    rt.set_routes("cali1", [RouteTarget("10.0.0.1")])
    kernel.fail_next["replace"] = errno.EINVAL
    res = rt.apply()
    assert "cali1" in res.errors
    res = rt.apply()
    assert res.ok and res.resynced and kernel.routes_on("cali1") == {"10.0.0.1/32"}


def test_failed_resync_is_reported_and_retried(kernel: FakeKernel, clock: FakeClock) -> None:
    rt = make_table(kernel, clock)
    kernel.fail_next["list_links"] = errno.ENOBUFS
    assert "*" in rt.apply().errors
    assert rt.apply().ok


def test_off_prefix_routes_removed_only_if_we_programmed_them(
    kernel: FakeKernel, clock: FakeClock
) -> None:
    kernel.add_link("eth1")
    kernel.add_route("10.9.0.1/32", "eth1")  # same proto, but not ours
    rt = make_table(kernel, clock, grace_period=0.0)
    rt.set_routes("eth1", [RouteTarget("10.0.0.5")])
    rt.apply()
    rt.set_routes("eth1", [])
    res = rt.apply()
    assert kernel.routes_on("eth1") == {"10.9.0.1/32"}
    assert res.removed_ips == {"10.0.0.5"}


def test_remove_external_routes_false_keeps_foreign_protocols(
    kernel: FakeKernel, clock: FakeClock
) -> None:
    kernel.add_link("cali1")
    kernel.add_route("10.0.0.8/32", "cali1", proto=4)
    kernel.add_route("10.0.0.9/32", "cali1", proto=3)
    rt = make_table(kernel, clock, grace_period=0.0, remove_external_routes=False)
    rt.apply()
    assert kernel.routes_on("cali1") == {"10.0.0.8/32"}


def test_neighbour_removed_when_mac_dropped(kernel: FakeKernel, clock: FakeClock) -> None:
    kernel.add_link("cali1")
    rt = make_table(kernel, clock)
    rt.set_routes("cali1", [RouteTarget("10.0.0.1", "ee:ee:ee:00:00:01")])
    rt.apply()
    rt.set_routes("cali1", [RouteTarget("10.0.0.1")])
    rt.apply()
    assert kernel.neigh == {}


def test_ip_versions_filter(kernel: FakeKernel, clock: FakeClock) -> None:
    kernel.add_link("cali1")
    rt = make_table(kernel, clock, ip_versions=(4,))
    rt.set_routes("cali1", [RouteTarget("10.0.0.1"), RouteTarget("fd00::1")])
    rt.apply()
    assert kernel.routes_on("cali1") == {"10.0.0.1/32"}
    assert "list_routes 6" not in kernel.calls
