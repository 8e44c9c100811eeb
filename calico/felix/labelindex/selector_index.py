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

Internally an item is a small int handle, given when it is first seen and dropped when it is
deleted: item IDs are frozen-dataclass keys whose ``__hash__`` is Python code (~0.5 us), and
one endpoint update hashed its ID ~12 times across the store, the label index and the match
sets (design/performance.md "Calc graph at 250,000"). Callers only ever see their own IDs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

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
        self._items_by_sel: dict[Hashable, set[int]] = {}
        self._sels_by_item: dict[int, set[Hashable]] = {}
        self._handles: dict[Hashable, int] = {}  # item ID -> handle
        self._ids: dict[int, Hashable] = {}  # handle -> item ID
        self._next_handle = 0

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
        for handle in before - now:
            self._stop(sel_id, handle)
        for handle in now - before:
            self._start(sel_id, handle)

    def delete_selector(self, sel_id: Hashable) -> None:
        """Called when a selector goes away; stops all its matches. Idempotent."""
        if self._selectors.pop(sel_id, None) is None:
            return
        self._candidates.remove(sel_id)
        for handle in list(self._items_by_sel.get(sel_id, ())):
            self._stop(sel_id, handle)

    # --- items and parents ------------------------------------------------------------------

    def update_labels(
        self, item_id: Hashable, labels: Mapping[str, str], parent_ids: Sequence[str] = ()
    ) -> None:
        """Called when an item is added or its labels/parents change; idempotent."""
        fresh = self._next_handle
        handle = self._handles.setdefault(item_id, fresh)  # one hash of the key, new or not
        if handle == fresh:
            self._next_handle = fresh + 1
            self._ids[fresh] = item_id
        elif self._store.is_unchanged(handle, labels, parent_ids):
            return
        old, new = self._store.put_item(handle, labels, parent_ids)
        if old is None:
            self._item_kv.add(handle, new.labels)
            self._match_new_item(handle, new)
        elif old.labels != new.labels:
            self._item_kv.remove(handle, old.labels)
            self._item_kv.add(handle, new.labels)
            self._rematch_item(handle, new)

    def delete_labels(self, item_id: Hashable) -> None:
        """Called when an item goes away; stops all its matches. Idempotent."""
        handle = self._handles.get(item_id)
        if handle is None:
            return
        old = self._store.pop_item(handle)
        assert old is not None
        self._item_kv.remove(handle, old.labels)
        for sel_id in list(self._sels_by_item.get(handle, ())):
            self._stop(sel_id, handle)
        del self._handles[item_id]
        del self._ids[handle]

    def update_parent_labels(self, parent_id: str, labels: Mapping[str, str]) -> None:
        """Called when a parent's labels are set or changed (the parent may not be referenced
        yet); idempotent."""
        self._refresh_children(self._store.set_parent(parent_id, labels))

    def delete_parent_labels(self, parent_id: str) -> None:
        """Called when a parent goes away; its children keep referencing it. Idempotent."""
        self._refresh_children(self._store.set_parent(parent_id, None))

    # --- queries ----------------------------------------------------------------------------

    def items_matching(self, sel_id: Hashable) -> frozenset[Hashable]:
        ids = self._ids
        return frozenset(ids[h] for h in self._items_by_sel.get(sel_id, ()))

    def selectors_matching(self, item_id: Hashable) -> frozenset[Hashable]:
        handle = self._handles.get(item_id)
        return frozenset(self._sels_by_item.get(handle, ())) if handle is not None else _NO_IDS

    def matches(self) -> frozenset[tuple[Hashable, Hashable]]:
        """Every current ``(sel_id, item_id)`` match."""
        ids = self._ids
        return frozenset((s, ids[h]) for s, hs in self._items_by_sel.items() for h in hs)

    def effective_labels(self, item_id: Hashable) -> dict[str, str] | None:
        handle = self._handles.get(item_id)
        item = None if handle is None else self._store.items.get(handle)
        return None if item is None else dict(item.labels)

    # --- internals --------------------------------------------------------------------------

    def _scan_items(self, selector: Selector) -> Iterable[int]:
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

    def _refresh_children(self, handles: Iterable[int]) -> None:
        store = self._store
        for handle in handles:
            item = store.items[handle]
            labels = store.merged(item.own, item.parents)
            if labels == item.labels:
                continue
            self._item_kv.remove(handle, item.labels)
            item.labels = labels
            self._item_kv.add(handle, labels)
            self._rematch_item(handle, item)

    def _match_new_item(self, handle: int, item: Item) -> None:
        """:meth:`_rematch_item` for an item with no matches yet (no stops to compute)."""
        labels = item.labels
        selectors = self._selectors
        for sel_id in self._candidates.candidates(labels):
            if selectors[sel_id].evaluate(labels):
                self._start(sel_id, handle)

    def _rematch_item(self, handle: int, item: Item) -> None:
        labels = item.labels
        selectors = self._selectors
        now = {s for s in self._candidates.candidates(labels) if selectors[s].evaluate(labels)}
        before = self._sels_by_item.get(handle, _NO_IDS)
        for sel_id in before - now:
            self._stop(sel_id, handle)
        for sel_id in now - before:
            self._start(sel_id, handle)

    def _start(self, sel_id: Hashable, handle: int) -> None:
        # get-or-insert without setdefault's throwaway set on every call after the first
        items = self._items_by_sel.get(sel_id)
        if items is None:
            self._items_by_sel[sel_id] = {handle}
        else:
            items.add(handle)
        sels = self._sels_by_item.get(handle)
        if sels is None:
            self._sels_by_item[handle] = {sel_id}
        else:
            sels.add(sel_id)
        self.on_match_started(sel_id, self._ids[handle])

    def _stop(self, sel_id: Hashable, handle: int) -> None:
        _unlink(self._items_by_sel, sel_id, handle)
        _unlink(self._sels_by_item, handle, sel_id)
        self.on_match_stopped(sel_id, self._ids[handle])


def _unlink(index: dict[Any, set[Any]], key: Any, value: Any) -> None:
    values = index[key]
    values.discard(value)
    if not values:
        del index[key]
