"""Health aggregation with upstream's semantics.

Invariants (each has a unit test):
- A reporter votes only on the qualities it registered for; a quality it does not vote on never
  affects the aggregate ("-" in the table).
- A new reporter starts live and *not* ready: readiness must be earned by a first report.
- A reporter whose timeout is > 0 and has passed since its last report fails every quality it
  votes on ("timed out"); exactly-at-the-timeout still counts as fresh.
- Zero reporters is live and ready.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from calico.boxtable import render_box_table
from calico.durations import format_duration

log = logging.getLogger(__name__)


TABLE_HEADERS = ("COMPONENT", "TIMEOUT", "LIVENESS", "READINESS", "DETAIL")


class UnknownReporterError(KeyError):
    """``report()`` for a name that was never registered: a programming error."""


@dataclass
class _Reporter:
    name: str
    votes_live: bool
    votes_ready: bool
    timeout: float
    live: bool = True
    ready: bool = False
    detail: str = ""
    last_report: float = 0.0

    def has_timed_out(self, now: float, timeout: float) -> bool:
        return timeout > 0 and (now - self.last_report) > timeout


def _vote(votes: bool, timed_out: bool, reported_ok: bool, quality: str) -> tuple[bool, str]:
    """One reporter's say on one quality: (keeps the aggregate good, its table cell)."""
    if not votes:
        return True, "-"
    if timed_out:
        return False, "timed out"
    if reported_ok:
        return True, f"reporting {quality}"
    return False, f"reporting non-{quality}"


@dataclass(frozen=True)
class HealthSummary:
    live: bool
    ready: bool
    detail: str


class HealthAggregator:
    """Collects reports from a process's loops and answers "is this process live / ready?".

    Thread-safe: loops report from their own threads while the HTTP server reads summaries.
    The clock is injectable so tests can step time instead of sleeping.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._reporters: dict[str, _Reporter] = {}
        self._overrides: dict[str, float] = {}
        self._last_summary: HealthSummary | None = None
        self._ever_ready = False

    # -- reporters -----------------------------------------------------------------------------

    def register_reporter(self, name: str, live: bool, ready: bool, timeout: float = 0.0) -> None:
        """Declare a reporter and the qualities it votes on; re-registering resets its state."""
        with self._lock:
            self._reporters[name] = _Reporter(
                name=name,
                votes_live=live,
                votes_ready=ready,
                timeout=float(timeout),
                last_report=self._clock(),
            )

    def report(self, name: str, *, live: bool, ready: bool, detail: str = "") -> None:
        """Replace ``name``'s latest report and refresh its timestamp (also when unchanged)."""
        with self._lock:
            rep = self._reporters.get(name)
            if rep is None:
                raise UnknownReporterError(f"health reporter {name!r} was never registered")
            changed = (rep.live, rep.ready, rep.detail) != (live, ready, detail)
            rep.live, rep.ready, rep.detail = live, ready, detail
            rep.last_report = self._clock()
        if changed:
            log.info(
                "Health of component changed: name=%s live=%s ready=%s detail=%r",
                name,
                live,
                ready,
                detail,
            )

    def set_global_timeout_overrides(self, overrides: Mapping[str, float]) -> None:
        """Replace per-reporter timeouts by name (upstream's HealthTimeoutOverrides)."""
        with self._lock:
            self._overrides = {k: float(v) for k, v in overrides.items()}

    # -- aggregation ---------------------------------------------------------------------------

    def summary(self) -> HealthSummary:
        """Compute the aggregate now; logs when the overall status changes."""
        now = self._clock()
        live = ready = True
        rows: list[tuple[str, str, str, str, str]] = []
        not_ready: list[str] = []
        with self._lock:
            for name in sorted(self._reporters):
                rep = self._reporters[name]
                timeout = self._overrides.get(name, rep.timeout)
                timed_out = rep.has_timed_out(now, timeout)
                live_ok, live_cell = _vote(rep.votes_live, timed_out, rep.live, "live")
                ready_ok, ready_cell = _vote(rep.votes_ready, timed_out, rep.ready, "ready")
                live, ready = live and live_ok, ready and ready_ok
                if not ready_ok:
                    not_ready.append(name)
                timeout_cell = format_duration(timeout) if timeout else "-"
                if name in self._overrides:
                    timeout_cell += " (override)"
                rows.append((name, timeout_cell, live_cell, ready_cell, rep.detail))
            result = HealthSummary(
                live=live, ready=ready, detail=render_box_table(TABLE_HEADERS, rows)
            )
            changed = self._last_summary is None or (
                (self._last_summary.live, self._last_summary.ready) != (live, ready)
            )
            self._last_summary = result
            ever_ready = self._ever_ready
            if ready:
                self._ever_ready = True
        for name in not_ready:
            # Not being ready during start-up is normal; after that it is worth a warning.
            log.log(
                logging.WARNING if ever_ready else logging.INFO, "Reporter is not ready: %s", name
            )
        if changed:
            log.info(
                "Overall health status changed: live=%s ready=%s\n%s", live, ready, result.detail
            )
        return result
