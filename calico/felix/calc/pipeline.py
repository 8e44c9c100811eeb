"""CalcPipeline: the calc graph, its EventSequencer and the one-shot InSync, single-threaded.

Why one class: the rule "flush the graph, then the sequencer, and after the first flush that
follows the syncer's in-sync send ``InSync`` exactly once" must hold for every driver - the
threaded AsyncCalcGraph and the synchronous use in tests and benchmarks - so it lives here once.
It implements SyncerCallbacks for synchronous callers, who decide when to ``flush()``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from calico.felix.messages import InSync, ToDataplane
from calico.syncer.api import SyncStatus, Update

log = logging.getLogger(__name__)


class Graph(Protocol):
    """The calc graph as the pipeline drives it (calico.felix.calc.calc_graph.CalcGraph)."""

    def on_update(self, update: Update) -> None: ...
    def on_status(self, status: SyncStatus) -> None: ...
    def flush(self) -> None: ...
    @property
    def wants_prepare(self) -> bool: ...
    def prepare_policies(self, limit: int) -> list[ToDataplane]: ...


class Flushable(Protocol):
    """The EventSequencer, as far as the pipeline is concerned."""

    def flush(self) -> object: ...
    def pending(self) -> bool: ...


class CalcPipeline:
    """See the module docstring. Not thread-safe: one thread feeds and flushes it."""

    def __init__(
        self, graph: Graph, sequencer: Flushable, sink: Callable[[list[ToDataplane]], None]
    ) -> None:
        self.graph = graph
        self.sequencer = sequencer
        self._sink = sink
        self._been_in_sync = False
        self._sent_in_sync = False

    def on_update(self, update: Update) -> None:
        self.graph.on_update(update)

    def on_updates(self, updates: list[Update]) -> None:
        for update in updates:
            self.graph.on_update(update)

    def on_status_updated(self, status: SyncStatus) -> None:
        self.graph.on_status(status)
        if status is SyncStatus.IN_SYNC:
            self._been_in_sync = True

    @property
    def wants_prepare(self) -> bool:
        """Inactive policies could be prepared now: only after ``InSync`` was sent (start-up
        is not slowed for a guess)."""
        return self._sent_in_sync and self.graph.wants_prepare

    def prepare(self, limit: int) -> int:
        """Send the dataplane up to ``limit`` prepared inactive policies (``PolicyPrepare``,
        one batch of their own); returns how many. Nothing before ``InSync``, nor while the
        sequencer holds unflushed output: the dataplane must have seen every activation and
        removal the graph made first, so a policy it still has active is never prepared."""
        if not self._sent_in_sync or self.sequencer.pending():
            return 0
        batch = self.graph.prepare_policies(limit)
        if batch:
            self._sink(batch)
        return len(batch)

    def flush(self) -> None:
        """Graph first (the policy resolver's batched endpoints), then the sequencer; then
        ``InSync`` if this is the first flush since the syncer reported in-sync."""
        self.graph.flush()
        self.sequencer.flush()
        if self._been_in_sync and not self._sent_in_sync:
            self._sent_in_sync = True
            log.info("Calculation graph in sync with the datastore; sending InSync")
            self._sink([InSync()])
