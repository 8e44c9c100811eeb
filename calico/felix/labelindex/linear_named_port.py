"""Naive IP set membership index: the oracle and baseline for SelectorAndNamedPortIndex.

Same API and callback contract, but no label or selector indexes: an endpoint change evaluates
every IP set, an IP set change evaluates every endpoint, a parent change scans every endpoint for
children. Each endpoint remembers its last contribution per set; a call sums contributions into
per-set reference counts and reports members whose count crossed zero. It does not use
:class:`~calico.felix.labelindex.selector_index.SelectorIndex`, so the two implementations
check each other.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from calico.felix.labelindex.linear import ChainedLabels
from calico.felix.labelindex.members import NamedPort, normalise_nets
from calico.felix.labelindex.named_port_index import (
    IPSetDef,
    MemberCallback,
    _ignore,
    make_ip_set,
)
from calico.selector import Selector


class _Endpoint:
    __slots__ = ("contrib", "labels", "nets", "parents", "ports")

    def __init__(
        self,
        labels: dict[str, str],
        nets: tuple[str, ...],
        ports: tuple[NamedPort, ...],
        parents: tuple[str, ...],
    ) -> None:
        self.labels = labels
        self.nets = nets
        self.ports = ports
        self.parents = parents
        self.contrib: dict[str, Sequence[str]] = {}  # set ID -> members this endpoint adds


class LinearSelectorAndNamedPortIndex:
    """Linear-scan twin of SelectorAndNamedPortIndex (identical public API and callbacks)."""

    def __init__(
        self,
        on_member_added: MemberCallback = _ignore,
        on_member_removed: MemberCallback = _ignore,
    ) -> None:
        self.on_member_added = on_member_added
        self.on_member_removed = on_member_removed
        self._eps: dict[Hashable, _Endpoint] = {}
        self._parents: dict[str, dict[str, str]] = {}
        self._sets: dict[str, IPSetDef] = {}
        self._merged: dict[Hashable, Mapping[str, str]] = {}  # as in LinearSelectorIndex

    def update_endpoint_or_set(
        self,
        item_id: Hashable,
        labels: Mapping[str, str],
        nets: Sequence[str],
        named_ports: Sequence[NamedPort] = (),
        parent_ids: Sequence[str] = (),
        *,
        nets_normalised: bool = False,
    ) -> None:
        """Called when an endpoint or network set is added or changed; idempotent. The nets
        are normalised whatever ``nets_normalised`` says (normalising a member is the identity),
        so a caller that lies about them is caught by the differential tests."""
        del nets_normalised
        old = self._eps.get(item_id)
        ep = _Endpoint(dict(labels), normalise_nets(nets), tuple(named_ports), tuple(parent_ids))
        if old is not None:
            ep.contrib = old.contrib
        self._eps[item_id] = ep
        self._merged.pop(item_id, None)
        self._recompute([item_id], list(self._sets))

    def delete_endpoint_or_set(self, item_id: Hashable) -> None:
        """Called when an endpoint or network set goes away; idempotent."""
        if item_id not in self._eps:
            return
        self._recompute([item_id], list(self._sets), deleting=True)
        del self._eps[item_id]
        self._merged.pop(item_id, None)

    def update_parent_labels(self, parent_id: str, labels: Mapping[str, str]) -> None:
        """Called when a profile's labels are set or changed; idempotent."""
        self._parents[parent_id] = dict(labels)
        self._recompute(self._children(parent_id), list(self._sets))

    def delete_parent_labels(self, parent_id: str) -> None:
        """Called when a profile goes away; idempotent."""
        self._parents.pop(parent_id, None)
        self._recompute(self._children(parent_id), list(self._sets))

    def update_ip_set(
        self,
        set_id: str,
        selector: Selector,
        named_port_protocol: str | None = None,
        named_port: str | None = None,
    ) -> None:
        """Called when an IP set becomes active or its definition changes; idempotent."""
        new = make_ip_set(selector, named_port_protocol, named_port)
        old = self._sets.get(set_id)
        if old is not None:
            new.refs = old.refs
        self._sets[set_id] = new
        self._recompute(list(self._eps), [set_id])

    def delete_ip_set(self, set_id: str) -> None:
        """Called when an IP set becomes inactive; emits nothing. Idempotent."""
        self._sets.pop(set_id, None)
        for ep in self._eps.values():
            ep.contrib.pop(set_id, None)

    def members(self, set_id: str) -> frozenset[str]:
        ip_set = self._sets.get(set_id)
        return frozenset() if ip_set is None else frozenset(ip_set.refs)

    def ip_set_ids(self) -> frozenset[str]:
        return frozenset(self._sets)

    def _children(self, parent_id: str) -> list[Hashable]:
        children = [i for i, ep in self._eps.items() if parent_id in ep.parents]
        for item_id in children:
            self._merged.pop(item_id, None)
        return children

    def _labels(self, item_id: Hashable, ep: _Endpoint) -> Mapping[str, str]:
        merged = self._merged.get(item_id)
        if merged is None:
            layers = [ep.labels, *(self._parents.get(p, {}) for p in ep.parents)]
            merged = dict(ChainedLabels(layers)) if ep.parents else ep.labels
            self._merged[item_id] = merged
        return merged

    def _recompute(
        self, item_ids: list[Hashable], set_ids: list[str], deleting: bool = False
    ) -> None:
        """Re-derive the listed endpoints' contributions to the listed sets, then report every
        member whose reference count went from zero to positive or back."""
        touched: dict[str, set[str]] = {}
        before: dict[tuple[str, str], int] = {}
        for item_id in item_ids:
            ep = self._eps[item_id]
            labels = self._labels(item_id, ep)
            for set_id in set_ids:
                ip_set = self._sets[set_id]
                old = ep.contrib.pop(set_id, ())
                new: Sequence[str] = ()
                if not deleting and ip_set.selector.evaluate(labels):
                    new = ip_set.contribution(ep.nets, ep.ports)
                    ep.contrib[set_id] = new
                refs = ip_set.refs
                for member in (*old, *new):
                    before.setdefault((set_id, member), refs.get(member, 0))
                    touched.setdefault(set_id, set()).add(member)
                for member in old:
                    refs[member] -= 1
                for member in new:
                    refs[member] = refs.get(member, 0) + 1
        for set_id, members in touched.items():
            refs = self._sets[set_id].refs
            for member in members:
                was, now = before[(set_id, member)], refs.get(member, 0)
                if now == 0:
                    refs.pop(member, None)
                if was == 0 and now > 0:
                    self.on_member_added(set_id, member)
                elif was > 0 and now == 0:
                    self.on_member_removed(set_id, member)
