"""Dataplane managers: each turns one slice of the calc-graph message stream into desired state.

The loop hands every message to every manager (registration order), then, when it decides to
apply, calls ``complete_deferred_work()`` on each so expensive rendering happens once per batch,
not once per message. Managers only record desired state (in the shared ``NftablesTable`` or the
``RouteTable``); the loop owns the single kernel write per apply.
"""

from __future__ import annotations

from typing import Protocol

from calico.felix.messages import ToDataplane


class Manager(Protocol):
    def on_update(self, msg: ToDataplane) -> None: ...

    def complete_deferred_work(self) -> None: ...


class IfaceAwareManager(Manager, Protocol):
    """Managers that also follow interface state from the interface monitor."""

    def on_iface_state(self, name: str, state: str, index: int) -> None: ...

    def on_iface_addrs(self, name: str, addrs: set[str] | None) -> None: ...


__all__ = ["IfaceAwareManager", "Manager"]
