"""Change-only interface tracking (the logic behind InterfaceMonitor)."""

from __future__ import annotations

from calico.felix.ifacemonitor import IfaceTracker, LinkFact


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.tracker = IfaceTracker(self.state, self.addrs)

    def state(self, name: str, state: str, index: int) -> None:
        self.events.append(("state", name, state, index))

    def addrs(self, name: str, addrs: set[str] | None) -> None:
        self.events.append(("addrs", name, addrs))

    def take(self) -> list[tuple]:
        out, self.events = self.events, []
        return out


def test_link_lifecycle_emits_only_changes() -> None:
    r = Recorder()
    t = r.tracker
    t.link_update(5, "cali1", up=False)
    t.link_update(5, "cali1", up=False)  # duplicate event
    t.link_update(5, "cali1", up=True)
    t.addr_added(5, "10.0.0.1")
    t.addr_added(5, "10.0.0.1")
    t.addr_removed(5, "10.0.0.1")
    t.link_deleted(5)
    assert r.take() == [
        ("state", "cali1", "down", 5),
        ("state", "cali1", "up", 5),
        ("addrs", "cali1", {"10.0.0.1"}),
        ("addrs", "cali1", set()),
        ("addrs", "cali1", None),
        ("state", "cali1", "absent", 5),
    ]


def test_rename_is_absent_then_new() -> None:
    r = Recorder()
    r.tracker.link_update(5, "tmp123", up=True)
    r.take()
    r.tracker.link_update(5, "cali1", up=True)
    assert r.take() == [
        ("addrs", "tmp123", None),
        ("state", "tmp123", "absent", 5),
        ("state", "cali1", "up", 5),
    ]


def test_address_before_link_is_held_until_link_known() -> None:
    r = Recorder()
    r.tracker.addr_added(9, "fd00::1")
    assert r.take() == []
    r.tracker.link_update(9, "eth0", up=True)
    assert r.take() == [("state", "eth0", "up", 9), ("addrs", "eth0", {"fd00::1"})]


def test_snapshot_diffs_against_reported_state() -> None:
    r = Recorder()
    t = r.tracker
    t.snapshot({1: LinkFact("lo", True), 5: LinkFact("cali1", True)}, {1: {"127.0.0.1"}})
    assert r.take() == [
        ("state", "lo", "up", 1),
        ("addrs", "lo", {"127.0.0.1"}),
        ("state", "cali1", "up", 5),
    ]
    # A later snapshot (e.g. after an overflow) reports only what differs.
    t.snapshot({1: LinkFact("lo", True), 6: LinkFact("cali2", False)}, {1: {"127.0.0.1"}})
    assert r.take() == [
        ("addrs", "cali1", None),
        ("state", "cali1", "absent", 5),
        ("state", "cali2", "down", 6),
    ]
    assert t.known() == {"lo": ("up", 1, {"127.0.0.1"}), "cali2": ("down", 6, set())}


def test_callback_exceptions_do_not_break_tracking() -> None:
    def boom(*_a: object) -> None:
        raise RuntimeError("consumer bug")

    t = IfaceTracker(boom, boom)
    t.link_update(1, "cali1", up=True)
    t.addr_added(1, "10.0.0.1")
    assert t.known() == {"cali1": ("up", 1, {"10.0.0.1"})}
