"""Which items (endpoints) each selector matches, kept up to date incrementally.

This is the index behind the ActiveRulesCalculator (upstream's ``InheritIndex``). Items are
indexed by effective label name/value (:class:`LabelValueIndex`) and selectors by their label
restrictions (:class:`SelectorCandidateIndex`), so:

* a new or changed selector scans only the items its cheapest restriction allows;
* a changed item evaluates only its candidate selectors;
* a changed parent re-evaluates only its children.

Callbacks fire synchronously inside the mutating call and must not re-enter the index. Each call
emits exactly the net change of the match relation: a ``(selector, item)`` pair starts at most
once, stops only if started, and a no-op update emits nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

from calico.felix.labelindex.candidates import SelectorCandidateIndex
from calico.felix.labelindex.inherit import InheritStore, Item
from calico.felix.labelindex.kvindex import LabelValueIndex
from calico.selector import Selector

MatchCallback = Callable[[Hashable, Hashable], None]

_NO_IDS: frozenset = frozenset()


def _ignore(_sel_id: Hashable, _item_id: Hashable) -> None:
    return None


class SelectorIndex:
    """Optimised selector-to-item match index (see module docstring)."""

    def __init__(
        self,
        on_match_started: MatchCallback = _ignore,
        on_match_stopped: MatchCallback = _ignore,
    ) -> None:
        self.on_match_started = on_match_started
        self.on_match_stopped = on_match_stopped
        self._store = InheritStore()
        self._item_kv = LabelValueIndex()
        self._selectors: dict[Hashable, Selector] = {}
        self._candidates = SelectorCandidateIndex()
        self._items_by_sel: dict[Hashable, set[Hashable]] = {}
        self._sels_by_item: dict[Hashable, set[Hashable]] = {}

    # --- selectors --------------------------------------------------------------------------

    def update_selector(self, sel_id: Hashable, selector: Selector) -> None:
        """Called when a selector is added or changed; idempotent for an equal selector."""
        old = self._selectors.get(sel_id)
        if old is not None and old == selector:
            return
        self._selectors[sel_id] = selector
        self._candidates.add(sel_id, selector)
        evaluate = selector.evaluate
        items = self._store.items
        now = {i for i in self._scan_items(selector) if evaluate(items[i].labels)}
        before = self._items_by_sel.get(sel_id, _NO_IDS)
        for item_id in before - now:
            self._stop(sel_id, item_id)
        for item_id in now - before:
            self._start(sel_id, item_id)

    def delete_selector(self, sel_id: Hashable) -> None:
        """Called when a selector goes away; stops all its matches. Idempotent."""
        if self._selectors.pop(sel_id, None) is None:
            return
        self._candidates.remove(sel_id)
        for item_id in list(self._items_by_sel.get(sel_id, ())):
            self._stop(sel_id, item_id)

    # --- items and parents ------------------------------------------------------------------

    def update_labels(
        self, item_id: Hashable, labels: Mapping[str, str], parent_ids: Sequence[str] = ()
    ) -> None:
        """Called when an item is added or its labels/parents change; idempotent."""
        if self._store.is_unchanged(item_id, labels, parent_ids):
            return
        old, new = self._store.put_item(item_id, labels, parent_ids)
        if old is not None:
            self._item_kv.remove(item_id, old.labels)
        self._item_kv.add(item_id, new.labels)
        if old is None or old.labels != new.labels:
            self._rematch_item(item_id, new)

    def delete_labels(self, item_id: Hashable) -> None:
        """Called when an item goes away; stops all its matches. Idempotent."""
        old = self._store.pop_item(item_id)
        if old is None:
            return
        self._item_kv.remove(item_id, old.labels)
        for sel_id in list(self._sels_by_item.get(item_id, ())):
            self._stop(sel_id, item_id)

    def update_parent_labels(self, parent_id: str, labels: Mapping[str, str]) -> None:
        """Called when a parent's labels are set or changed (the parent may not be referenced
        yet); idempotent."""
        self._refresh_children(self._store.set_parent(parent_id, labels))

    def delete_parent_labels(self, parent_id: str) -> None:
        """Called when a parent goes away; its children keep referencing it. Idempotent."""
        self._refresh_children(self._store.set_parent(parent_id, None))

    # --- queries ----------------------------------------------------------------------------

    def items_matching(self, sel_id: Hashable) -> frozenset[Hashable]:
        return frozenset(self._items_by_sel.get(sel_id, ()))

    def selectors_matching(self, item_id: Hashable) -> frozenset[Hashable]:
        return frozenset(self._sels_by_item.get(item_id, ()))

    def matches(self) -> frozenset[tuple[Hashable, Hashable]]:
        """Every current ``(sel_id, item_id)`` match."""
        return frozenset((s, i) for s, ids in self._items_by_sel.items() for i in ids)

    def effective_labels(self, item_id: Hashable) -> dict[str, str] | None:
        item = self._store.items.get(item_id)
        return None if item is None else dict(item.labels)

    # --- internals --------------------------------------------------------------------------

    def _scan_items(self, selector: Selector) -> Iterable[Hashable]:
        """Items that may match ``selector``, via its cheapest restriction or a full scan."""
        items = self._store.items
        best_cost, best = len(items), None
        for label, restriction in selector.label_restrictions.items():
            if restriction.impossible:
                return ()
            cost = self._item_kv.estimate(label, restriction)
            if cost is not None and cost < best_cost:
                best_cost, best = cost, (label, restriction)
        if best is None:
            return list(items)
        return list(self._item_kv.scan(*best))

    def _refresh_children(self, child_ids: Iterable[Hashable]) -> None:
        store = self._store
        for item_id in child_ids:
            item = store.items[item_id]
            labels = store.merged(item.own, item.parents)
            if labels == item.labels:
                continue
            self._item_kv.remove(item_id, item.labels)
            item.labels = labels
            self._item_kv.add(item_id, labels)
            self._rematch_item(item_id, item)

    def _rematch_item(self, item_id: Hashable, item: Item) -> None:
        labels = item.labels
        selectors = self._selectors
        now = {s for s in self._candidates.candidates(labels) if selectors[s].evaluate(labels)}
        before = self._sels_by_item.get(item_id, _NO_IDS)
        for sel_id in before - now:
            self._stop(sel_id, item_id)
        for sel_id in now - before:
            self._start(sel_id, item_id)

    def _start(self, sel_id: Hashable, item_id: Hashable) -> None:
        self._items_by_sel.setdefault(sel_id, set()).add(item_id)
        self._sels_by_item.setdefault(item_id, set()).add(sel_id)
        self.on_match_started(sel_id, item_id)

    def _stop(self, sel_id: Hashable, item_id: Hashable) -> None:
        _unlink(self._items_by_sel, sel_id, item_id)
        _unlink(self._sels_by_item, item_id, sel_id)
        self.on_match_stopped(sel_id, item_id)


def _unlink(index: dict[Hashable, set[Hashable]], key: Hashable, value: Hashable) -> None:
    values = index[key]
    values.discard(value)
    if not values:
        del index[key]
