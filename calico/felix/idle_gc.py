"""Run the cyclic collector when Felix's dataplane is idle, not inside an activation.

Why: a collection runs in whichever thread allocates the 701st net container, and holds the
GIL until it ends. After the start-up freeze (``calico.gcpause``) an activation of 100
policies makes ~15,000 net allocations, so automatic collection put ~20 young and 2-3
middle-generation collections (2.3-3.4 ms each at ``bench_felix.py --large``) inside the new
workload's path, and the first full collection after the freeze (30-39 ms) inside one
workload's path in most runs (design/performance.md "Collection at idle").

:class:`IdleCollector` keeps CPython's own schedule (its thresholds, its rule that a full
collection waits until a quarter of the long-lived objects are new) but runs it from the
dataplane loop when there is nothing to apply (``InternalDataplane``'s ``on_idle``).
Automatic collection stays on with a gen-0 threshold of :data:`BACKSTOP`, so a process that
is never idle still collects, in young collections of at most ~1 ms.
"""

from __future__ import annotations

import gc

#: The gen-0 threshold automatic collection keeps while the idle collector runs: a busy
#: stretch (never idle) still collects every this many net allocations.
BACKSTOP = 100_000


def due_generation(
    counts: tuple[int, int, int],
    thresholds: tuple[int, int, int],
    full_allowed: bool,
) -> int | None:
    """The generation CPython's collector would collect at these counts (``gc.get_count()``),
    or None. A full collection also needs ``full_allowed`` (CPython: the objects moved to
    the oldest generation since the last full one exceed a quarter of those it kept); when
    it is not, the middle generation is considered, as CPython does."""
    if counts[0] <= thresholds[0]:
        return None
    if counts[2] > thresholds[2] and full_allowed:
        return 2
    if counts[1] > thresholds[1]:
        return 1
    return 0


class IdleCollector:
    """The collector's schedule, run at idle points (:meth:`collect_if_due`) once
    :meth:`start` has raised the automatic gen-0 threshold to the backstop.

    The full-collection rule needs two counts CPython does not expose: the objects its last
    full collection kept (counted once after each of ours, ``gc.get_objects(2)``) and those
    moved to the oldest generation since (each of our middle collections adds the young
    objects it did not find unreachable). A collection we did not run (the backstop,
    ``gc.collect()``) is seen in ``gc.get_stats()`` and the oldest generation recounted."""

    def __init__(self, backstop: int = BACKSTOP) -> None:
        self._backstop = backstop
        self._thresholds = gc.get_threshold()
        self._active = False
        # Objects in the oldest generation after the last full collection (None: none since
        # start, so the first is due as soon as the counts say so, as after CPython's
        # freeze), and objects moved there since.
        self._long_lived: int | None = None
        self._pending = 0
        self._seen = (0, 0)  # middle and full collections run so far, as gc.get_stats() says

    @property
    def active(self) -> bool:
        return self._active

    def start(self) -> None:
        """Take young and middle collections over. Nothing happens if the collector is off
        (a test, a pause that is not this process's to end) or this already started."""
        if self._active or not gc.isenabled():
            return
        self._thresholds = gc.get_threshold()
        t0, t1, t2 = self._thresholds
        gc.set_threshold(max(t0, self._backstop), t1, t2)
        self._seen = _older_collections()
        self._active = True

    def stop(self) -> None:
        """Give the schedule back to automatic collection."""
        if self._active:
            self._active = False
            gc.set_threshold(*self._thresholds)

    def collect_if_due(self) -> int | None:
        """Collect the generation CPython would collect now; returns it, or None."""
        if not self._active or not gc.isenabled():
            return None
        counts = gc.get_count()
        if counts[0] <= self._thresholds[0]:
            return None
        seen = _older_collections()
        if seen != self._seen:  # someone else's middle or full collection
            self._recount(after_full=seen[1] != self._seen[1])
        full_allowed = self._long_lived is None or self._pending > self._long_lived / 4
        generation = due_generation(counts, self._thresholds, full_allowed)
        if generation == 2:
            gc.collect(2)
            self._recount(after_full=True)
        elif generation == 1:
            young = len(gc.get_objects(0)) + len(gc.get_objects(1))
            self._pending += max(young - gc.collect(1), 0)
        else:
            gc.collect(0)
        self._seen = _older_collections()
        return generation

    def _recount(self, after_full: bool = False) -> None:
        """The oldest generation counted again: after a full collection, what it kept;
        after middle ones, what they moved there (unknown without a full one since start)."""
        now = len(gc.get_objects(2))
        if after_full:
            self._long_lived, self._pending = now, 0
        elif self._long_lived is not None:
            self._pending = max(now - self._long_lived, 0)


def _older_collections() -> tuple[int, int]:
    stats = gc.get_stats()
    return stats[1]["collections"], stats[2]["collections"]
