"""calico.felix.idle_gc: CPython's collection schedule, run at the dataplane's idle points.

The schedule is checked against a reference written from CPython's ``collect_generations``;
the collector itself is the real one (collections observed through ``gc.callbacks``)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.felix.idle_gc import BACKSTOP, IdleCollector, due_generation

THRESHOLDS = (700, 10, 10)


def due_reference(
    counts: tuple[int, int, int], thresholds: tuple[int, int, int], full_allowed: bool
) -> int | None:
    """CPython 3.11 ``collect_generations``, run when gen 0's count passes its threshold: the
    oldest generation whose count exceeds its threshold (the oldest one only if allowed)."""
    if not counts[0] > thresholds[0]:
        return None
    for generation in (2, 1, 0):
        if counts[generation] > thresholds[generation]:
            if generation == 2 and not full_allowed:
                continue
            return generation
    return None  # pragma: no cover - gen 0 always qualifies here


@given(
    st.tuples(*(st.integers(0, 2_000) for _ in range(3))),
    st.tuples(st.integers(1, 1_000), st.integers(1, 20), st.integers(1, 20)),
    st.booleans(),
)
def test_due_generation_matches_cpythons_rule(
    counts: tuple[int, int, int], thresholds: tuple[int, int, int], full_allowed: bool
) -> None:
    assert due_generation(counts, thresholds, full_allowed) == due_reference(
        counts, thresholds, full_allowed
    )


def test_due_generation_at_each_threshold() -> None:
    assert due_generation((700, 99, 99), THRESHOLDS, True) is None  # gen 0 at, not past
    assert due_generation((701, 10, 10), THRESHOLDS, True) == 0
    assert due_generation((701, 11, 10), THRESHOLDS, True) == 1
    assert due_generation((701, 11, 11), THRESHOLDS, True) == 2
    assert due_generation((701, 11, 11), THRESHOLDS, False) == 1  # full not allowed yet
    assert due_generation((701, 0, 11), THRESHOLDS, False) == 0


@pytest.fixture
def collector() -> Iterator[IdleCollector]:
    was_enabled, thresholds = gc.isenabled(), gc.get_threshold()
    gc.enable()
    gc.set_threshold(*THRESHOLDS)
    idle = IdleCollector()
    yield idle
    idle.stop()
    gc.set_threshold(*thresholds)
    if not was_enabled:
        gc.disable()


@pytest.fixture
def collected() -> Iterator[list[int]]:
    """The generation of every collection that starts while the test runs."""
    seen: list[int] = []

    def record(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(record)
    yield seen
    gc.callbacks.remove(record)


class _Tracked:
    """A container the collector tracks, allocated without a free list (lists and dicts
    reuse freed ones, which gen 0's count does not see)."""

    __slots__ = ("ref",)


def _grow_gen0(n: int) -> list[_Tracked]:
    """``n`` live tracked containers: gen 0's count grows by about ``n``. Callers keep
    automatic collection out of the way (the backstop above ``n``)."""
    return [_Tracked() for _ in range(n)]


def test_start_raises_only_gen0_threshold_and_stop_restores(collector: IdleCollector) -> None:
    collector.start()
    assert collector.active and gc.get_threshold() == (BACKSTOP, 10, 10)
    collector.start()  # again: no change, and stop still restores the original
    collector.stop()
    assert not collector.active and gc.get_threshold() == THRESHOLDS


def test_a_disabled_collector_is_left_alone(collector: IdleCollector, collected: list[int]) -> None:
    gc.disable()
    collector.start()
    assert not collector.active and gc.get_threshold() == THRESHOLDS
    keep = _grow_gen0(THRESHOLDS[0] + 50)
    assert collector.collect_if_due() is None and collected == []
    gc.enable()
    collector.start()
    gc.disable()  # turned off after start (a test, a pause): nothing either
    keep += _grow_gen0(THRESHOLDS[0] + 50)
    collected.clear()
    assert collector.active and collector.collect_if_due() is None and collected == []
    del keep


def test_nothing_is_collected_before_start(collector: IdleCollector, collected: list[int]) -> None:
    gc.collect(2)
    gc.set_threshold(BACKSTOP, 10, 10)  # no automatic collection in between
    keep = _grow_gen0(THRESHOLDS[0] + 50)
    collected.clear()
    assert collector.collect_if_due() is None and collected == []
    del keep


def test_idle_collection_frees_a_cycle_when_gen0_passes_its_threshold(
    collector: IdleCollector, collected: list[int]
) -> None:
    collector.start()
    gc.collect(2)
    collected.clear()

    class Node:
        pass

    node = Node()
    node.self = node  # type: ignore[attr-defined]
    freed = weakref.ref(node)
    del node
    keep = _grow_gen0(THRESHOLDS[0] - 50)
    assert gc.get_count()[0] <= THRESHOLDS[0]
    assert collector.collect_if_due() is None and freed() is not None
    keep += _grow_gen0(100)
    assert collector.collect_if_due() == 0
    assert collected == [0] and freed() is None
    assert gc.get_count()[0] < 10  # the counts restart as after an automatic collection
    del keep


def test_after_eleven_young_collections_a_middle_one(
    collector: IdleCollector, collected: list[int]
) -> None:
    """CPython collects the middle generation once its count (young collections since the
    last one) exceeds 10."""
    collector.start()
    gc.collect(2)
    collected.clear()
    keep: list[Any] = []
    for _ in range(13):
        keep += _grow_gen0(THRESHOLDS[0] + 20)
        collector.collect_if_due()
    assert collected == [0] * 11 + [1, 0]


def _force_full_due(keep: list[Any]) -> None:
    """Counts at which a full collection is due if allowed: 11 middle collections (run here,
    not by the idle collector) and gen 0 past its threshold."""
    for _ in range(THRESHOLDS[2] + 1):
        gc.collect(1)
    keep.append(_grow_gen0(THRESHOLDS[0] + 20))


def test_full_collections_wait_for_a_quarter_more_long_lived_objects(
    collector: IdleCollector, collected: list[int]
) -> None:
    """Moved to the oldest generation by middle collections the idle collector did not run
    (counted again from ``gc.get_objects(2)``)."""
    collector.start()
    keep: list[Any] = []
    _force_full_due(keep)
    collected.clear()
    assert collector.collect_if_due() == 2  # the first after start: due at once
    long_lived = len(gc.get_objects(2))

    keep.append(_grow_gen0(long_lived // 5))  # a fifth more reach the oldest generation
    _force_full_due(keep)
    collected.clear()
    assert collector.collect_if_due() == 0 and collected == [0]  # not a quarter yet

    keep.append(_grow_gen0(long_lived // 4 + 1_000))
    _force_full_due(keep)
    collected.clear()
    assert collector.collect_if_due() == 2 and collected == [2]


def _idle_until_full(collector: IdleCollector, collected: list[int], rounds: int) -> int | None:
    """Idle points with gen 0 past its threshold each time (objects that live through the
    young collection, then die): the number of middle collections before the first full
    one, or None if none ran in ``rounds``."""
    collected.clear()
    for _ in range(rounds):
        passing = _grow_gen0(THRESHOLDS[0] + 20)
        generation = collector.collect_if_due()
        del passing
        if generation == 2:
            return collected.count(1)
    return None


def test_the_idle_collectors_own_middle_collections_count_toward_a_full_one(
    collector: IdleCollector, collected: list[int]
) -> None:
    collector.start()
    # Enough long-lived objects that the ~740 passing through each middle collection alive
    # (and counted as moved, as CPython counts them) stay well under an eighth of them.
    keep: list[Any] = [_grow_gen0(200_000)]
    _force_full_due(keep)
    assert collector.collect_if_due() == 2
    long_lived = len(gc.get_objects(2))
    keep.append(_grow_gen0(long_lived // 4 + 20_000))  # moved there by our middle ones
    middles = _idle_until_full(collector, collected, 12 * 13)
    assert middles == THRESHOLDS[2] + 1  # as soon as the middle count allows it

    long_lived = len(gc.get_objects(2))
    keep.append(_grow_gen0(long_lived // 8))  # too few for another
    assert _idle_until_full(collector, collected, 12 * 13) is None
    assert collected.count(1) >= THRESHOLDS[2] + 1  # the counts allowed it: the ratio did not


def test_a_full_collection_elsewhere_resets_the_long_lived_count(
    collector: IdleCollector, collected: list[int]
) -> None:
    """A full collection the idle collector did not run (the backstop, ``gc.collect()``) can
    shrink the oldest generation below what its last one kept: the pending count then starts
    from the smaller size, or no full collection would be due for ever."""
    collector.start()
    keep: list[Any] = []
    doomed = _grow_gen0(len(gc.get_objects(2)))  # as many again, alive at the next full one
    _force_full_due(keep)
    assert collector.collect_if_due() == 2
    long_lived = len(gc.get_objects(2))
    del doomed
    gc.collect()  # not ours: the oldest generation loses about half
    smaller = len(gc.get_objects(2))
    assert smaller < long_lived * 3 // 4
    _force_full_due(keep)
    assert collector.collect_if_due() == 0  # the shrink noticed, nothing pending yet
    keep.append(_grow_gen0(smaller // 4 + 1_000))
    _force_full_due(keep)
    collected.clear()
    assert collector.collect_if_due() == 2 and collected == [2]
