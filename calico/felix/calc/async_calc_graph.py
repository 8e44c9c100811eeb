"""AsyncCalcGraph: runs the calculation graph on its own thread, fed by a syncer.

Why: the syncer must never block on policy calculation, and every calc node assumes a single
thread. The syncer hands over batches through a bounded queue (backpressure); the loop applies
updates one at a time to a :class:`~calico.felix.calc.pipeline.CalcPipeline`, then flushes it at
most once per token of a 10 ms / burst-10 bucket, so a storm of small batches coalesces into few
dataplane batches.

Contracts:
- ``InSync`` is sent exactly once, right after the first flush that follows the syncer
  reporting in-sync (the pipeline's rule): the dataplane then knows it has a complete picture.
- Health reporter ``CalculationGraph`` (live + ready, 30 s timeout): reported at start, on every
  status change, at least every 10 s while idle and between updates while busy. Ready only while
  the last status is in-sync. A graph stuck inside one update stops reporting and times out.
- ``request_prepare()`` (any thread; Felix calls it at the dataplane's idle point) asks for
  :data:`PREPARE_CHUNK` inactive policies to be parsed ahead of their activation and sent as
  ``PolicyPrepare``: at most one request is queued, and it yields to any input or unflushed
  change (design/felix-calc.md "Preparing inactive policies").
- An exception in the graph (or sink) stops the loop: it is logged, reported non-live, kept in
  ``error``, re-raised by ``stop()``; later ``on_updates`` calls raise ``CalcGraphFailed``.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable

from calico.felix.calc.pipeline import CalcPipeline
from calico.felix.loopthread import LoopThread
from calico.felix.throttle import TokenBucket
from calico.health import HealthAggregator
from calico.syncer.api import SyncStatus, Update

log = logging.getLogger(__name__)

HEALTH_NAME = "CalculationGraph"
HEALTH_TIMEOUT = 30.0
HEALTH_INTERVAL = 10.0
_BUSY_REPORT_GAP = 1.0  # while applying a long batch, report at most once a second
_WAKE = object()
_PREPARE = object()
#: Inactive policies parsed per ``request_prepare``: ~0.5 ms, so new input waits at most that.
PREPARE_CHUNK = 10


class CalcGraphFailed(RuntimeError):
    """The calculation-graph thread died; ``__cause__`` is the original exception."""


class AsyncCalcGraph:
    """Implements ``calico.syncer.api.SyncerCallbacks``; owns one thread (``start``/``stop``)."""

    def __init__(
        self,
        pipeline: CalcPipeline,
        health: HealthAggregator | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        throttle: TokenBucket | None = None,
        max_queued_batches: int = 100,
        max_wait: float = 1.0,
    ) -> None:
        self._pipeline = pipeline
        self._health = health
        self._clock = clock
        self._throttle = throttle if throttle is not None else TokenBucket(clock=clock)
        self._max_wait = max_wait
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max_queued_batches)
        self._stopping = threading.Event()
        self._thread = LoopThread(
            "calc-graph",
            self._stopping,
            self._iterate,
            before=self._report_health,
            on_failure=self._failed,
            failure_message="Calculation graph failed; stopping its thread",
            logger=log,
        )
        self._error: BaseException | None = None
        # Loop-thread state.
        self._status = SyncStatus.WAIT_FOR_DATASTORE
        self._dirty = False
        self._last_health_report = float("-inf")
        self._prepare_queued = False  # set by request_prepare, cleared by the loop
        if health is not None:
            health.register_reporter(HEALTH_NAME, live=True, ready=True, timeout=HEALTH_TIMEOUT)

    # -- SyncerCallbacks (called from the syncer's thread) ----------------------------------------

    def on_updates(self, updates: list[Update]) -> None:
        if updates:
            self._put(list(updates))

    def on_status_updated(self, status: SyncStatus) -> None:
        self._put(status)

    def request_prepare(self) -> None:
        """Have the loop prepare a chunk of inactive policies, if any wait and no request is
        queued. Never blocks: a full queue means real work, which comes first anyway."""
        if self._prepare_queued or self._error is not None or self._stopping.is_set():
            return
        if not self._pipeline.wants_prepare:
            return
        self._prepare_queued = True
        try:
            self._queue.put_nowait(_PREPARE)
        except queue.Full:
            self._prepare_queued = False

    def _put(self, item: object) -> None:
        while True:
            if self._error is not None:
                raise CalcGraphFailed("calculation graph thread has failed") from self._error
            if self._stopping.is_set():
                log.debug("Calculation graph stopped; dropping %r", type(item).__name__)
                return
            try:
                self._queue.put(item, timeout=0.5)
                return
            except queue.Full:
                continue  # re-check for failure/stop, then keep applying backpressure

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop (pending input is discarded) and join it; re-raise what killed it."""
        self._stopping.set()
        with contextlib.suppress(queue.Full):  # if full, the loop has input to wake it anyway
            self._queue.put_nowait(_WAKE)
        if not self._thread.join(timeout):
            raise TimeoutError(f"calculation graph thread did not stop within {timeout}s")
        if self._error is not None:
            raise self._error

    @property
    def error(self) -> BaseException | None:
        return self._error

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    # -- the loop -------------------------------------------------------------------------------

    def _iterate(self) -> None:
        try:
            item = self._queue.get(timeout=self._wait_time())
        except queue.Empty:
            item = None
        if isinstance(item, list):
            self._apply_updates(item)
        elif isinstance(item, SyncStatus):
            self._apply_status(item)
        elif item is _PREPARE:
            self._prepare_queued = False
            if not self._dirty and self._queue.empty():  # real work first
                self._pipeline.prepare(PREPARE_CHUNK)
        if self._stopping.is_set():
            return
        self._maybe_flush()
        if self._clock() - self._last_health_report >= HEALTH_INTERVAL:
            self._report_health()

    def _failed(self, exc: BaseException) -> None:
        self._error = exc
        if self._health is not None:
            detail = f"calculation graph failed: {exc!r}"
            self._health.report(HEALTH_NAME, live=False, ready=False, detail=detail)

    def _wait_time(self) -> float:
        wait = self._last_health_report + HEALTH_INTERVAL - self._clock()
        if self._dirty:
            wait = min(wait, self._throttle.time_until_token())
        return min(max(wait, 0.0), self._max_wait)

    def _apply_updates(self, updates: list[Update]) -> None:
        for update in updates:
            if self._stopping.is_set():
                return
            self._pipeline.on_update(update)
            self._dirty = True
            if self._clock() - self._last_health_report >= _BUSY_REPORT_GAP:
                self._report_health()

    def _apply_status(self, status: SyncStatus) -> None:
        log.info("Calculation graph: datastore status now %s", status.value)
        self._status = status
        self._pipeline.on_status_updated(status)
        self._dirty = True
        self._report_health()

    def _maybe_flush(self) -> None:
        if not self._dirty or not self._throttle.try_take():
            return
        self._pipeline.flush()
        self._dirty = False

    def _report_health(self) -> None:
        self._last_health_report = self._clock()
        if self._health is not None:
            ready = self._status is SyncStatus.IN_SYNC
            self._health.report(
                HEALTH_NAME, live=True, ready=ready, detail="" if ready else "not in sync"
            )


__all__ = [
    "HEALTH_INTERVAL",
    "HEALTH_NAME",
    "HEALTH_TIMEOUT",
    "PREPARE_CHUNK",
    "AsyncCalcGraph",
    "CalcGraphFailed",
]
