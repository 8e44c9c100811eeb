"""Interface state tracking: turns raw link/address facts into change-only callbacks.

Netlink events can arrive twice (an event queued while we were dumping) or be lost (socket
overflow), so the monitor feeds both events and periodic full snapshots through this tracker,
which compares against what it last reported and emits only real changes. Keyed by ifindex so a
rename is reported as the old name going absent and the new one appearing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

log = logging.getLogger(__name__)

IfaceState = Literal["up", "down", "absent"]
StateCallback = Callable[[str, IfaceState, int], None]
AddrsCallback = Callable[[str, "set[str] | None"], None]


@dataclass
class _Iface:
    name: str
    up: bool
    addrs: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class LinkFact:
    name: str
    up: bool


class IfaceTracker:
    """Reported state per ifindex; every mutation emits callbacks for what changed."""

    def __init__(self, on_state: StateCallback, on_addrs: AddrsCallback) -> None:
        self._on_state = on_state
        self._on_addrs = on_addrs
        self._ifaces: dict[int, _Iface] = {}
        self._orphan_addrs: dict[int, set[str]] = {}  # addresses seen before their link

    # --- events -------------------------------------------------------------------------------

    def link_update(self, index: int, name: str, up: bool) -> None:
        cur = self._ifaces.get(index)
        if cur is not None and cur.name != name:
            self._remove(index)
            cur = None
        if cur is None:
            addrs = self._orphan_addrs.pop(index, set())
            self._ifaces[index] = _Iface(name=name, up=up, addrs=set(addrs))
            self._emit_state(name, "up" if up else "down", index)
            if addrs:
                self._emit_addrs(name, set(addrs))
            return
        if cur.up != up:
            cur.up = up
            self._emit_state(name, "up" if up else "down", index)

    def link_deleted(self, index: int) -> None:
        self._orphan_addrs.pop(index, None)
        if index in self._ifaces:
            self._remove(index)

    def addr_added(self, index: int, addr: str) -> None:
        cur = self._ifaces.get(index)
        if cur is None:
            self._orphan_addrs.setdefault(index, set()).add(addr)
            return
        if addr not in cur.addrs:
            cur.addrs.add(addr)
            self._emit_addrs(cur.name, set(cur.addrs))

    def addr_removed(self, index: int, addr: str) -> None:
        cur = self._ifaces.get(index)
        if cur is None:
            self._orphan_addrs.get(index, set()).discard(addr)
            return
        if addr in cur.addrs:
            cur.addrs.discard(addr)
            self._emit_addrs(cur.name, set(cur.addrs))

    # --- snapshots ----------------------------------------------------------------------------

    def snapshot(self, links: Mapping[int, LinkFact], addrs: Mapping[int, set[str]]) -> None:
        """Reconcile with a complete dump: vanished links go absent, the rest are diffed."""
        for index in [i for i in self._ifaces if i not in links]:
            self._remove(index)
        self._orphan_addrs.clear()
        for index, fact in sorted(links.items()):
            self.link_update(index, fact.name, fact.up)
            cur = self._ifaces[index]
            new_addrs = set(addrs.get(index, set()))
            if new_addrs != cur.addrs:
                cur.addrs = new_addrs
                self._emit_addrs(cur.name, set(new_addrs))

    def known(self) -> dict[str, tuple[IfaceState, int, set[str]]]:
        """Current picture by name (for tests and debugging)."""
        return {
            i.name: ("up" if i.up else "down", idx, set(i.addrs)) for idx, i in self._ifaces.items()
        }

    # --- internals ----------------------------------------------------------------------------

    def _remove(self, index: int) -> None:
        gone = self._ifaces.pop(index)
        self._emit_addrs(gone.name, None)
        self._emit_state(gone.name, "absent", index)

    def _emit_state(self, name: str, state: IfaceState, index: int) -> None:
        try:
            self._on_state(name, state, index)
        except Exception:  # a consumer bug must not stop monitoring
            log.exception("on_iface_state callback failed for %s", name)

    def _emit_addrs(self, name: str, addrs: set[str] | None) -> None:
        try:
            self._on_addrs(name, addrs)
        except Exception:
            log.exception("on_iface_addrs callback failed for %s", name)
