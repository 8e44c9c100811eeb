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


class Flushable(Protocol):
    """The EventSequencer, as far as the pipeline is concerned."""

    def flush(self) -> object: ...


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

    def flush(self) -> None:
        """Graph first (the policy resolver's batched endpoints), then the sequencer; then
        ``InSync`` if this is the first flush since the syncer reported in-sync."""
        self.graph.flush()
        self.sequencer.flush()
        if self._been_in_sync and not self._sent_in_sync:
            self._sent_in_sync = True
            log.info("Calculation graph in sync with the datastore; sending InSync")
            self._sink([InSync()])
