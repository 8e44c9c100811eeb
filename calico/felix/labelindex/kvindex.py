"""Items indexed by label name and value, so a new selector scans only plausible items."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping
from itertools import chain

from calico.selector import LabelRestriction

_EMPTY: frozenset = frozenset()


class LabelValueIndex:
    """``label -> value -> {item ids}`` plus per-label counts.

    The caller owns the labels: it must :meth:`remove` an item with exactly the labels it was
    :meth:`add`-ed with before changing them.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, dict[str, set[Hashable]]] = {}
        self._present: dict[str, int] = {}

    def add(self, item_id: Hashable, labels: Mapping[str, str]) -> None:
        by_name, present = self._by_name, self._present
        for name, value in labels.items():
            values = by_name.get(name)
            if values is None:
                by_name[name] = {value: {item_id}}
                present[name] = 1
                continue
            ids = values.get(value)
            if ids is None:
                values[value] = {item_id}
            else:
                ids.add(item_id)
            present[name] += 1

    def remove(self, item_id: Hashable, labels: Mapping[str, str]) -> None:
        for name, value in labels.items():
            values = self._by_name[name]
            ids = values[value]
            ids.discard(item_id)
            if not ids:
                del values[value]
            count = self._present[name] - 1
            if count:
                self._present[name] = count
            else:
                del self._present[name]
                del self._by_name[name]

    def estimate(self, name: str, restriction: LabelRestriction) -> int | None:
        """How many items a scan driven by ``restriction`` visits; ``None`` if it cannot drive
        a scan (only absence is required)."""
        if restriction.possible_values is not None:
            values = self._by_name.get(name)
            if values is None:
                return 0
            return sum(len(values.get(v, _EMPTY)) for v in restriction.possible_values)
        if restriction.must_be_present:
            return self._present.get(name, 0)
        return None

    def scan(self, name: str, restriction: LabelRestriction) -> Iterator[Hashable]:
        """Every item that can satisfy ``restriction`` (a superset of the matches, each once:
        an item has one value per label). Only valid when :meth:`estimate` is not ``None``."""
        values = self._by_name.get(name)
        if values is None:
            return iter(())
        if restriction.possible_values is not None:
            sets: Iterable[set[Hashable]] = [
                values[v] for v in restriction.possible_values if v in values
            ]
        else:
            sets = list(values.values())
        return chain.from_iterable(sets)
