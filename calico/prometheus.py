"""Prometheus pieces every daemon shares: counters under exact upstream names, and the endpoint.

Upstream's Go counters have no ``_total`` suffix (``felix_resyncs_started``,
``typha_updates_total`` is its own name); prometheus-client would add one to a "counter" family
and dashboards written for upstream would miss the series. :class:`ExactCounter` is therefore
exported untyped — ``rate()``/``increase()`` work on it all the same. :class:`MetricsServer`
owns the HTTP thread as the health server does. Ground floor: prometheus-client and stdlib only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import MetricsHandler
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)


class _Child:
    """One label combination of an :class:`ExactCounter` (resolved once, incremented often)."""

    def __init__(self, parent: ExactCounter, labels: tuple[str, ...]) -> None:
        self._parent, self._labels = parent, labels

    def inc(self, amount: float = 1.0) -> None:
        self._parent.add(self._labels, amount)


class ExactCounter(Collector):
    """A (labelled) counter exported under exactly ``name``. Thread-safe."""

    def __init__(self, name: str, doc: str, labelnames: tuple[str, ...] = ()) -> None:
        self.name, self.doc, self.labelnames = name, doc, labelnames
        self._values: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()
        if not labelnames:
            self._values[()] = 0.0

    def labels(self, *labels: str) -> _Child:
        """The series for ``labels``, created (at 0) now so it is exported before its first inc."""
        with self._lock:
            self._values.setdefault(labels, 0.0)
        return _Child(self, labels)

    def inc(self, amount: float = 1.0, *labels: str) -> None:
        self.add(labels, amount)

    def add(self, labels: tuple[str, ...], amount: float) -> None:
        with self._lock:
            self._values[labels] = self._values.get(labels, 0.0) + amount

    def value(self, *labels: str) -> float:
        with self._lock:
            return self._values.get(labels, 0.0)

    def collect(self) -> Iterator[Metric]:
        metric = Metric(self.name, self.doc, "unknown")
        with self._lock:
            for labels, value in sorted(self._values.items()):
                metric.add_sample(self.name, dict(zip(self.labelnames, labels, strict=True)), value)
        yield metric


class MetricsServer:
    """Owns the Prometheus HTTP thread (``start``/``stop``), as the health server does."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self._registry, self._host, self._port = registry, host, port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        handler = MetricsHandler.factory(self._registry)
        self._httpd = ThreadingHTTPServer((self._host or "", self._port), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="prometheus",
            daemon=True,
        )
        self._thread.start()
        log.info("Prometheus metrics listening host=%r port=%d", self._host, self.port)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1]) if self._httpd is not None else 0

    def stop(self, timeout: float = 2.0) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout)
