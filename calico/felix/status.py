"""Felix's process status keys: ``.../host/<h>/status`` (with a TTL, so it vanishes when Felix
dies) and ``.../host/<h>/last_reported_status`` (no TTL), every ReportingIntervalSecs.

Operators and tooling use the TTL'd key as a liveness signal for each node's Felix
(design/felix-dataplane.md, "Status reports").
Write failures are logged and retried at the next interval; they never stop Felix. The
Kubernetes datastore has no place for these keys: there, as upstream, reporting is skipped
(one info line at start, no per-interval warning).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from calico.datastore import Backend
from calico.model import ActiveStatusReportKey, LastStatusReportKey

log = logging.getLogger(__name__)


def region_string(region: str) -> str:
    """Felix's region segment: ``no-region`` or ``region-<name>`` (OpenstackRegion)."""
    return f"region-{region}" if region else "no-region"


class StatusReporter:
    """Owns one thread (``start``/``stop``)."""

    def __init__(
        self,
        backend: Backend,
        hostname: str,
        *,
        interval: float = 30.0,
        ttl: float = 90.0,
        region: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._backend = backend
        self._active = ActiveStatusReportKey(hostname, region_string(region)).default_path()
        self._last = LastStatusReportKey(hostname, region_string(region)).default_path()
        self._interval, self._ttl = interval, ttl
        self._clock = clock
        self._start = clock()
        self._first = True
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def report_once(self) -> bool:
        now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        value = json.dumps(
            {
                "time": now,
                "uptime": round(self._clock() - self._start, 3),
                "first_update": self._first,
            }
        )
        try:
            self._backend.apply(self._active, value, ttl=self._ttl)
            self._backend.apply(self._last, value)
        except Exception as exc:  # datastore outages are expected; keep going
            log.warning("Failed to write Felix status report: %s", exc)
            return False
        self._first = False
        return True

    def start(self) -> None:
        if self._interval <= 0:
            log.info("Status reporting disabled (ReportingIntervalSecs=0)")
            return
        if getattr(self._backend, "datastore_type", "") == "kubernetes":
            log.info("Status reporting skipped: the Kubernetes datastore does not store it")
            return
        self._thread = threading.Thread(target=self._run, name="status-reporter", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.report_once()
            self._stop.wait(self._interval)

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
