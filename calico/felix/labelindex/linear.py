"""Deliberately naive selector index: the test oracle and benchmark baseline for SelectorIndex.

Same API and callback contract as :class:`~calico.felix.labelindex.selector_index.SelectorIndex`
but no indexes at all: a selector change scans every item, an item change evaluates every
selector, a parent change scans every item for children. Effective labels are looked up through
the item/parent chain on each evaluation instead of being cached. Shares no code with the
optimised index beyond the Selector type, so a bug in one is unlikely to hide in the other.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence

from calico.felix.labelindex.selector_index import MatchCallback, _ignore
from calico.selector import Selector


class ChainedLabels(Mapping[str, str]):
    """Read-only view: the item's own labels, then each parent's in order (first wins)."""

    def __init__(self, layers: Sequence[Mapping[str, str]]) -> None:
        self._layers = layers

    def __getitem__(self, key: str) -> str:
        for layer in self._layers:
            if key in layer:
                return layer[key]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        seen: set[str] = set()
        for layer in self._layers:
            for key in layer:
                if key not in seen:
                    seen.add(key)
                    yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)


class LinearSelectorIndex:
    """Linear-scan twin of SelectorIndex (identical public API and callbacks)."""

    def __init__(
        self,
        on_match_started: MatchCallback = _ignore,
        on_match_stopped: MatchCallback = _ignore,
    ) -> None:
        self.on_match_started = on_match_started
        self.on_match_stopped = on_match_stopped
        self._selectors: dict[Hashable, Selector] = {}
        self._items: dict[Hashable, tuple[dict[str, str], tuple[str, ...]]] = {}
        self._parents: dict[str, dict[str, str]] = {}
        self._matches: set[tuple[Hashable, Hashable]] = set()
        # Merged labels per item, dropped whenever the item or one of its parents changes.
        self._merged: dict[Hashable, Mapping[str, str]] = {}

    def update_selector(self, sel_id: Hashable, selector: Selector) -> None:
        """Called when a selector is added or changed; idempotent."""
        self._selectors[sel_id] = selector
        for item_id in list(self._items):
            self._recheck(sel_id, item_id, self._labels_of(item_id))

    def delete_selector(self, sel_id: Hashable) -> None:
        """Called when a selector goes away; idempotent."""
        self._selectors.pop(sel_id, None)
        for pair in [p for p in self._matches if p[0] == sel_id]:
            self._matches.discard(pair)
            self.on_match_stopped(*pair)

    def update_labels(
        self, item_id: Hashable, labels: Mapping[str, str], parent_ids: Sequence[str] = ()
    ) -> None:
        """Called when an item is added or changed; idempotent."""
        self._items[item_id] = (dict(labels), tuple(parent_ids))
        self._merged.pop(item_id, None)
        self._recheck_item(item_id)

    def delete_labels(self, item_id: Hashable) -> None:
        """Called when an item goes away; idempotent."""
        self._items.pop(item_id, None)
        self._merged.pop(item_id, None)
        for pair in [p for p in self._matches if p[1] == item_id]:
            self._matches.discard(pair)
            self.on_match_stopped(*pair)

    def update_parent_labels(self, parent_id: str, labels: Mapping[str, str]) -> None:
        """Called when a parent's labels are set or changed; idempotent."""
        self._parents[parent_id] = dict(labels)
        self._recheck_children(parent_id)

    def delete_parent_labels(self, parent_id: str) -> None:
        """Called when a parent goes away; idempotent."""
        self._parents.pop(parent_id, None)
        self._recheck_children(parent_id)

    def items_matching(self, sel_id: Hashable) -> frozenset[Hashable]:
        return frozenset(i for s, i in self._matches if s == sel_id)

    def selectors_matching(self, item_id: Hashable) -> frozenset[Hashable]:
        return frozenset(s for s, i in self._matches if i == item_id)

    def matches(self) -> frozenset[tuple[Hashable, Hashable]]:
        return frozenset(self._matches)

    def effective_labels(self, item_id: Hashable) -> dict[str, str] | None:
        if item_id not in self._items:
            return None
        return dict(self._labels_of(item_id))

    def _labels_of(self, item_id: Hashable) -> Mapping[str, str]:
        merged = self._merged.get(item_id)
        if merged is None:
            own, parents = self._items[item_id]
            layers = [own, *(self._parents.get(p, {}) for p in parents)]
            merged = self._merged[item_id] = dict(ChainedLabels(layers)) if parents else own
        return merged

    def _recheck_children(self, parent_id: str) -> None:
        for item_id, (_, parents) in list(self._items.items()):
            if parent_id in parents:
                self._merged.pop(item_id, None)
                self._recheck_item(item_id)

    def _recheck_item(self, item_id: Hashable) -> None:
        labels = self._labels_of(item_id)
        for sel_id in list(self._selectors):
            self._recheck(sel_id, item_id, labels)

    def _recheck(self, sel_id: Hashable, item_id: Hashable, labels: Mapping[str, str]) -> None:
        now = self._selectors[sel_id].evaluate(labels)
        pair = (sel_id, item_id)
        was = pair in self._matches
        if now and not was:
            self._matches.add(pair)
            self.on_match_started(sel_id, item_id)
        elif was and not now:
            self._matches.discard(pair)
            self.on_match_stopped(sel_id, item_id)
