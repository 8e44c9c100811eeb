"""Selectors indexed by their label restrictions, so an item change evaluates only candidates.

Each selector is filed under one key derived from :attr:`Selector.label_restrictions`:

* ``(label, value, label2, value2)`` for each pair of allowed values, if two labels must each
  take one of a set of values (the two with the fewest allowed values, ties by name; at most
  :data:`MAX_PAIRS` value pairs): an item then meets only the selectors that fit two of its
  labels, not one. At 250,000 endpoints the scale shape's selectors (``app == .. && role ==
  .. && team ==``) filed under ``app`` alone gave each endpoint ~7 candidates for ~1 match, and
  the policy index compiled and ran ~200 selectors per local endpoint;
* ``(label, value)`` for each allowed value, if only one label must take one of a set of values;
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

#: The most value pairs a selector is filed under; beyond it, its first label alone.
MAX_PAIRS = 64


class _Key(NamedTuple):
    kind: str  # "pair", "value", "present", "unindexed" or "never"
    label: str = ""
    values: frozenset[str] = frozenset()
    label2: str = ""
    values2: frozenset[str] = frozenset()


_UNINDEXED = _Key("unindexed")
_NEVER = _Key("never")


def choose_key(selector: Selector) -> _Key:
    """Where to file ``selector``: the two labels with fewest allowed values, else the one,
    then presence, then unindexed."""
    best: _Key | None = None
    second: _Key | None = None
    present: _Key | None = None
    restrictions = selector.label_restrictions
    for label in sorted(restrictions):
        r = restrictions[label]
        if r.impossible:
            return _NEVER
        if r.possible_values is not None:
            key = _Key("value", label, r.possible_values)
            if best is None or len(r.possible_values) < len(best.values):
                best, second = key, best
            elif second is None or len(r.possible_values) < len(second.values):
                second = key
        elif r.must_be_present and present is None:
            present = _Key("present", label)
    if best and second and len(best.values) * len(second.values) <= MAX_PAIRS:
        return _Key("pair", best.label, best.values, second.label, second.values)
    return best or present or _UNINDEXED


class SelectorCandidateIndex:
    """Selector IDs keyed by the most selective restriction of each selector."""

    def __init__(self) -> None:
        self._by_value: dict[str, dict[str, set[Hashable]]] = {}
        # label -> value -> label2 -> value2 -> selector IDs
        self._by_pair: dict[str, dict[str, dict[str, dict[str, set[Hashable]]]]] = {}
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
        if key.kind == "pair":
            by_value = self._by_pair.setdefault(key.label, {})
            for value in key.values:
                by_value2 = by_value.setdefault(value, {}).setdefault(key.label2, {})
                for value2 in key.values2:
                    by_value2.setdefault(value2, set()).add(sel_id)
        elif key.kind == "value":
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
        if key.kind == "pair":
            by_pair = self._by_pair[key.label]
            for value in key.values:
                by_label2 = by_pair[value]
                by_value2 = by_label2[key.label2]
                for value2 in key.values2:
                    _discard(by_value2, value2, sel_id)
                if not by_value2:
                    del by_label2[key.label2]
                if not by_label2:
                    del by_pair[value]
            if not by_pair:
                del self._by_pair[key.label]
        elif key.kind == "value":
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
        by_value, by_present, by_pair = self._by_value, self._by_present, self._by_pair
        for name, value in labels.items():
            values = by_value.get(name)
            if values is not None:
                ids = values.get(value)
                if ids:
                    out |= ids
            ids = by_present.get(name)
            if ids:
                out |= ids
            pairs = by_pair.get(name)
            if pairs is not None:
                by_label2 = pairs.get(value)
                if by_label2 is not None:
                    for label2, by_value2 in by_label2.items():
                        value2 = labels.get(label2)
                        if value2 is not None:
                            ids = by_value2.get(value2)
                            if ids:
                                out |= ids
        return out


def _discard(buckets: dict[str, set[Hashable]], key: str, sel_id: Hashable) -> None:
    ids = buckets[key]
    ids.discard(sel_id)
    if not ids:
        del buckets[key]
