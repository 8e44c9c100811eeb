"""Test doubles for the dataplane managers and loop (no kernel access)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from calico.felix.nftables.model import Chain, NftSet, VerdictMap
from calico.felix.nftables.table import ApplyResult


class FakeTable:
    """Records desired state like NftablesTable's mutators; ``apply`` succeeds unless told."""

    def __init__(self) -> None:
        self.chains: dict[str, Chain] = {}
        self.sets: dict[str, NftSet] = {}
        self.maps: dict[str, VerdictMap] = {}
        self.fail_next = 0
        self.applies = 0
        self.next_refresh = float("inf")
        self.prepared: list[str] = []  # prepare_chain calls, by chain name

    def prepare_chain(self, chain: Chain) -> None:
        self.prepared.append(chain.name)

    def set_chain(self, chain: Chain) -> None:
        self.chains[chain.name] = chain

    def remove_chain(self, name: str) -> None:
        self.chains.pop(name, None)

    def set_set(self, s: NftSet) -> None:
        self.sets[s.name] = NftSet(s.name, s.type, s.interval, set(s.elements))

    def add_set_members(self, name: str, members: Any) -> None:
        self.sets[name].elements.update(members)

    def remove_set_members(self, name: str, members: Any) -> None:
        self.sets[name].elements.difference_update(members)

    def remove_set(self, name: str) -> None:
        self.sets.pop(name, None)

    def set_map(self, vmap: VerdictMap) -> None:
        self.maps[vmap.name] = VerdictMap(vmap.name, vmap.key_type, dict(vmap.elements))

    def set_map_element(self, name: str, key: Any, verdict: Any) -> None:
        self.maps[name].elements[key] = verdict

    def remove_map_element(self, name: str, key: Any) -> None:
        self.maps[name].elements.pop(key, None)

    def apply(self) -> ApplyResult:
        self.applies += 1
        if self.fail_next:
            self.fail_next -= 1
            return ApplyResult(ok=False, error="injected failure")
        return ApplyResult(ok=True)


@dataclass
class FakeRouteResult:
    errors: dict[str, str] = field(default_factory=dict)
    conntrack_flush_ips: set[str] = field(default_factory=set)


class FakeRouteTable:
    def __init__(self) -> None:
        self.routes: dict[str, list[Any]] = {}
        self.applies = 0
        self.flush: set[str] = set()

    def set_routes(self, iface: str, targets: Any) -> None:
        self.routes[iface] = list(targets)

    def remove_iface(self, iface: str) -> None:
        self.routes.pop(iface, None)

    def on_iface_state(self, name: str, state: str, index: int) -> None:
        pass

    def next_deadline(self) -> float | None:
        return None

    def apply(self) -> FakeRouteResult:
        self.applies += 1
        flush, self.flush = self.flush, set()
        return FakeRouteResult(conntrack_flush_ips=flush)
