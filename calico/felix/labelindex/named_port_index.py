"""IP set membership: which CIDRs / IP+port pairs each active selector or named-port set holds.

Upstream's ``SelectorAndNamedPortIndex``. Matching is delegated to a :class:`SelectorIndex`
(IP set ID = selector ID there); this layer turns match changes into member changes:

* a plain selector set holds each matching endpoint's / network set's normalised nets;
* a named-port set holds ``<ip>,<proto>:<port>`` for each matching endpoint's ports with that
  name and a compatible protocol (see :func:`~calico.felix.labelindex.members.port_members`).

Members are reference-counted per set. Each call emits exactly the net membership change it
caused (all increments are applied before any decrement), so a member shared by two endpoints
never flaps and ``on_member_removed`` only ever names a member that is present.
:meth:`delete_ip_set` is silent, as upstream: the consumer drops the whole set.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from calico.felix.labelindex.members import (
    NamedPort,
    normalise_nets,
    port_members,
    set_protocol,
)
from calico.felix.labelindex.selector_index import SelectorIndex
from calico.selector import Selector

MemberCallback = Callable[[str, str], None]
EndpointData = tuple[tuple[str, ...], tuple[NamedPort, ...]]  # (normalised nets, named ports)
_Delta = Counter[tuple[Any, str]]  # (set ID, member) -> reference-count change


_NO_SETS: frozenset = frozenset()


def _ignore(_set_id: str, _member: str) -> None:
    return None


class IPSetDef:
    """An IP set's definition and its member reference counts."""

    __slots__ = ("port_name", "protocol", "refs", "selector")

    def __init__(self, selector: Selector, protocol: str | None, port_name: str | None) -> None:
        self.selector = selector
        self.protocol = protocol
        self.port_name = port_name
        self.refs: dict[str, int] = {}

    def same_as(self, other: IPSetDef) -> bool:
        return (self.selector, self.protocol, self.port_name) == (
            other.selector,
            other.protocol,
            other.port_name,
        )

    def contribution(self, nets: tuple[str, ...], ports: tuple[NamedPort, ...]) -> Sequence[str]:
        """The members one endpoint with ``nets``/``ports`` adds when it matches this set
        (a plain set's are the endpoint's own tuple: callers only read it)."""
        if self.port_name is None:
            return nets
        assert self.protocol is not None
        return port_members(nets, ports, self.port_name, self.protocol)


def make_ip_set(
    selector: Selector, named_port_protocol: str | None, named_port: str | None
) -> IPSetDef:
    """Validate and normalise an IP set definition: no port name means a plain selector set
    (the protocol is then ignored); a port name without a protocol means ``any``."""
    if named_port is None:
        return IPSetDef(selector, None, None)
    return IPSetDef(selector, set_protocol(named_port_protocol) or "any", named_port)


class SelectorAndNamedPortIndex:
    """Optimised IP set membership index (see module docstring)."""

    #: A new item's members are counted directly (no delta against a previous contribution);
    #: ``False`` sends it through the general path, the reference the fast path is tested
    #: against (tests only).
    new_item_fast_path = True

    def __init__(
        self,
        on_member_added: MemberCallback = _ignore,
        on_member_removed: MemberCallback = _ignore,
    ) -> None:
        self.on_member_added = on_member_added
        self.on_member_removed = on_member_removed
        self._started: list[tuple[Hashable, Hashable]] = []
        self._stopped: list[tuple[Hashable, Hashable]] = []
        self._matcher = SelectorIndex(
            lambda s, i: self._started.append((s, i)),
            lambda s, i: self._stopped.append((s, i)),
        )
        self._eps: dict[Hashable, EndpointData] = {}
        self._sets: dict[str, IPSetDef] = {}

    # --- endpoints, network sets, parents ---------------------------------------------------

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
        """Called when an endpoint or network set is added or changed; idempotent. ``nets`` are
        CIDRs or bare IPs (normalised here; a ``/0`` becomes two ``/1`` halves), or, with
        ``nets_normalised``, members already (e.g. the output of
        :func:`calico.felix.labelindex.members.host_cidrs`), taken as given."""
        data = (tuple(nets) if nets_normalised else normalise_nets(nets), tuple(named_ports))
        old = self._eps.setdefault(item_id, data)  # one hash of the key for a new item
        if old is data:
            if self.new_item_fast_path:
                return self._add_new_item(item_id, labels, data, parent_ids)
            old = None
        self._update_item(item_id, labels, data, old, parent_ids)

    def _add_new_item(
        self,
        item_id: Hashable,
        labels: Mapping[str, str],
        data: EndpointData,
        parent_ids: Sequence[str],
    ) -> None:
        """:meth:`_update_item` for an item seen for the first time (already in ``_eps``): it
        has no previous contribution to take back, so its members' counts go straight up, in
        the order the general path's delta would apply them (sets as ``selectors_matching``
        iterates them, members in contribution order; a repeated member is added once)."""
        matcher = self._matcher
        matcher.update_labels(item_id, labels, parent_ids)
        if not self._started:
            return  # matches nothing: no members
        self._started.clear()
        sets = self._sets
        added = self.on_member_added
        nets, ports = data
        for set_id in matcher.selectors_matching(item_id):
            ip_set = sets[set_id]
            refs = ip_set.refs
            members = nets if ip_set.port_name is None else ip_set.contribution(nets, ports)
            for member in members:
                count = refs.get(member, 0)
                refs[member] = count + 1
                if not count:
                    added(set_id, member)

    def _update_item(
        self,
        item_id: Hashable,
        labels: Mapping[str, str],
        data: EndpointData,
        old: EndpointData | None,
        parent_ids: Sequence[str],
    ) -> None:
        """The general path: the net change between ``old``'s contribution (``None``: none)
        and ``data``'s, as one reference-count delta."""
        before = _NO_SETS if old is None else self._matcher.selectors_matching(item_id)
        self._eps[item_id] = data
        self._matcher.update_labels(item_id, labels, parent_ids)
        delta: _Delta = Counter()
        if old == data:
            self._pairs_to_delta(delta)
            return self._apply(delta)
        self._started.clear()
        self._stopped.clear()
        for set_id in self._matcher.selectors_matching(item_id):
            self._add_contribution(delta, set_id, data, +1)
        if old is not None:
            for set_id in before:
                self._add_contribution(delta, set_id, old, -1)
        self._apply(delta)

    def delete_endpoint_or_set(self, item_id: Hashable) -> None:
        """Called when an endpoint or network set goes away; idempotent."""
        old = self._eps.pop(item_id, None)
        if old is None:
            return
        delta: _Delta = Counter()
        for set_id in self._matcher.selectors_matching(item_id):
            self._add_contribution(delta, set_id, old, -1)
        self._matcher.delete_labels(item_id)
        self._stopped.clear()
        self._apply(delta)

    def update_parent_labels(self, parent_id: str, labels: Mapping[str, str]) -> None:
        """Called when a profile's labels are set or changed; idempotent."""
        self._matcher.update_parent_labels(parent_id, labels)
        self._apply(self._pairs_to_delta(Counter()))

    def delete_parent_labels(self, parent_id: str) -> None:
        """Called when a profile goes away; idempotent."""
        self._matcher.delete_parent_labels(parent_id)
        self._apply(self._pairs_to_delta(Counter()))

    # --- IP sets ----------------------------------------------------------------------------

    def update_ip_set(
        self,
        set_id: str,
        selector: Selector,
        named_port_protocol: str | None = None,
        named_port: str | None = None,
    ) -> None:
        """Called when an IP set becomes active (or, unusually, its definition changes under
        the same ID); emits its initial members. Idempotent for an identical definition."""
        new = make_ip_set(selector, named_port_protocol, named_port)
        old = self._sets.get(set_id)
        if old is not None and old.same_as(new):
            return
        self._sets[set_id] = new
        self._matcher.update_selector(set_id, selector)
        self._started.clear()
        self._stopped.clear()
        refs = new.refs
        for item_id in self._matcher.items_matching(set_id):
            for member in new.contribution(*self._eps[item_id]):
                refs[member] = refs.get(member, 0) + 1
        before = set() if old is None else set(old.refs)
        for member in refs.keys() - before:
            self.on_member_added(set_id, member)
        for member in before - refs.keys():
            self.on_member_removed(set_id, member)

    def delete_ip_set(self, set_id: str) -> None:
        """Called when an IP set becomes inactive. Emits nothing (the whole set is dropped
        downstream); idempotent."""
        if self._sets.pop(set_id, None) is None:
            return
        self._matcher.delete_selector(set_id)
        self._stopped.clear()

    # --- queries ----------------------------------------------------------------------------

    def members(self, set_id: str) -> frozenset[str]:
        ip_set = self._sets.get(set_id)
        return frozenset() if ip_set is None else frozenset(ip_set.refs)

    def ip_set_ids(self) -> frozenset[str]:
        return frozenset(self._sets)

    # --- internals --------------------------------------------------------------------------

    def _pairs_to_delta(self, delta: _Delta) -> _Delta:
        """Fold queued match starts/stops (endpoint data unchanged) into ``delta``."""
        for set_id, item_id in self._started:
            self._add_contribution(delta, set_id, self._eps[item_id], +1)
        for set_id, item_id in self._stopped:
            self._add_contribution(delta, set_id, self._eps[item_id], -1)
        self._started.clear()
        self._stopped.clear()
        return delta

    def _add_contribution(
        self,
        delta: _Delta,
        set_id: Any,
        data: EndpointData,
        sign: int,
    ) -> None:
        for member in self._sets[set_id].contribution(*data):
            delta[(set_id, member)] += sign

    def _apply(self, delta: _Delta) -> None:
        """Apply reference-count changes; emit only 0 <-> positive transitions."""
        for (set_id, member), change in delta.items():
            if not change:
                continue
            refs = self._sets[set_id].refs
            before = refs.get(member, 0)
            after = before + change
            if after < 0:
                raise AssertionError(f"negative refcount for {member} in {set_id}")
            if after:
                refs[member] = after
            else:
                del refs[member]
            if before == 0:
                self.on_member_added(set_id, member)
            elif after == 0:
                self.on_member_removed(set_id, member)
