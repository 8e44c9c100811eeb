"""Selectors indexed by their label restrictions, so an item change evaluates only candidates.

Each selector is filed under one key derived from :attr:`Selector.label_restrictions`:

* ``(label, value)`` for each allowed value, if some label must take one of a set of values
  (the label with the fewest allowed values wins);
* ``label`` if some label must merely be present;
* the "unindexed" bucket otherwise (e.g. ``!has(a)``, ``a != "x"``, ``all()``);
* nowhere at all if a restriction is impossible (the selector provably matches nothing).

Soundness: an item whose labels violate a selector's restriction cannot match it, so a selector
not returned by :meth:`SelectorCandidateIndex.candidates` for an item's labels does not match it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import NamedTuple

from calico.selector import Selector


class _Key(NamedTuple):
    kind: str  # "value", "present", "unindexed" or "never"
    label: str = ""
    values: frozenset[str] = frozenset()


_UNINDEXED = _Key("unindexed")
_NEVER = _Key("never")


def choose_key(selector: Selector) -> _Key:
    """Where to file ``selector``: fewest allowed values wins, then presence, then unindexed."""
    best: _Key | None = None
    present: _Key | None = None
    restrictions = selector.label_restrictions
    for label in sorted(restrictions):
        r = restrictions[label]
        if r.impossible:
            return _NEVER
        if r.possible_values is not None:
            if best is None or len(r.possible_values) < len(best.values):
                best = _Key("value", label, r.possible_values)
        elif r.must_be_present and present is None:
            present = _Key("present", label)
    return best or present or _UNINDEXED


class SelectorCandidateIndex:
    """Selector IDs keyed by the most selective restriction of each selector."""

    def __init__(self) -> None:
        self._by_value: dict[str, dict[str, set[Hashable]]] = {}
        self._by_present: dict[str, set[Hashable]] = {}
        self._unindexed: set[Hashable] = set()
        self._keys: dict[Hashable, _Key] = {}

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def unindexed_count(self) -> int:
        """Selectors evaluated on every item change (a tuning signal)."""
        return len(self._unindexed)

    def add(self, sel_id: Hashable, selector: Selector) -> None:
        """File ``sel_id``, replacing any previous filing."""
        self.remove(sel_id)
        key = choose_key(selector)
        self._keys[sel_id] = key
        if key.kind == "value":
            by_value = self._by_value.setdefault(key.label, {})
            for value in key.values:
                by_value.setdefault(value, set()).add(sel_id)
        elif key.kind == "present":
            self._by_present.setdefault(key.label, set()).add(sel_id)
        elif key.kind == "unindexed":
            self._unindexed.add(sel_id)

    def remove(self, sel_id: Hashable) -> None:
        """Unfile ``sel_id``; idempotent."""
        key = self._keys.pop(sel_id, None)
        if key is None:
            return
        if key.kind == "value":
            by_value = self._by_value[key.label]
            for value in key.values:
                _discard(by_value, value, sel_id)
            if not by_value:
                del self._by_value[key.label]
        elif key.kind == "present":
            _discard(self._by_present, key.label, sel_id)
        elif key.kind == "unindexed":
            self._unindexed.discard(sel_id)

    def candidates(self, labels: Mapping[str, str]) -> set[Hashable]:
        """Every selector that might match ``labels`` (a superset of the true matches)."""
        out = set(self._unindexed)
        by_value, by_present = self._by_value, self._by_present
        for name, value in labels.items():
            values = by_value.get(name)
            if values is not None:
                ids = values.get(value)
                if ids:
                    out |= ids
            ids = by_present.get(name)
            if ids:
                out |= ids
        return out


def _discard(buckets: dict[str, set[Hashable]], key: str, sel_id: Hashable) -> None:
    ids = buckets[key]
    ids.discard(sel_id)
    if not ids:
        del buckets[key]
