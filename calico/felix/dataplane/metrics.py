"""Felix's Prometheus metrics under upstream's names, and the HTTP server that exposes them.

Counters are exported under their exact upstream names (``felix_resyncs_started``, not
``..._total``): dashboards and alerts written for upstream Felix query those names, and
prometheus-client would otherwise add a ``_total`` suffix. They are typed ``untyped`` for that
reason; ``rate()``/``increase()`` work on them all the same. Cluster-wide counts
(``felix_cluster_num_*``) and resyncs come from the calc graph's StatsCollector (the dataplane
only ever sees local endpoints) through :class:`ClusterStatsGauges`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Gauge, Summary
from prometheus_client.exposition import MetricsHandler
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from calico.felix.calc.stats_collector import ClusterStats

log = logging.getLogger(__name__)


class ExactCounter(Collector):
    """A (labelled) counter exported under exactly ``name``. Thread-safe."""

    def __init__(self, name: str, doc: str, labelnames: tuple[str, ...] = ()) -> None:
        self.name, self.doc, self.labelnames = name, doc, labelnames
        self._values: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()
        if not labelnames:
            self._values[()] = 0.0

    def inc(self, amount: float = 1.0, *labels: str) -> None:
        with self._lock:
            self._values[labels] = self._values.get(labels, 0.0) + amount

    def value(self, *labels: str) -> float:
        with self._lock:
            return self._values.get(labels, 0.0)

    def collect(self) -> Iterator[Metric]:
        # "unknown" (untyped): prometheus-client renames a "counter" family's HELP/TYPE lines to
        # <name>_total, which would no longer match the samples' upstream name.
        metric = Metric(self.name, self.doc, "unknown")
        with self._lock:
            for labels, value in sorted(self._values.items()):
                metric.add_sample(self.name, dict(zip(self.labelnames, labels, strict=True)), value)
        yield metric


class FelixMetrics:
    """Every metric Felix exports, in one registry (so tests can use a private one)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry if registry is not None else CollectorRegistry()
        self.apply_time = Summary(
            "felix_int_dataplane_apply_time_seconds",
            "Time in seconds that it took to apply a dataplane update.",
            registry=r,
        )
        self.msg_batch_size = Summary(
            "felix_int_dataplane_msg_batch_size",
            "Number of messages processed in each batch.",
            registry=r,
        )
        self.messages = ExactCounter(
            "felix_int_dataplane_messages",
            "Number of dataplane messages by type.",
            ("type",),
        )
        self.failures = ExactCounter(
            "felix_int_dataplane_failures", "Number of times dataplane updates failed."
        )
        self.resyncs_started = ExactCounter(
            "felix_resyncs_started",
            "Number of times Felix has started resyncing with the datastore.",
        )
        for c in (self.messages, self.failures, self.resyncs_started):
            r.register(c)
        gauges = {
            "active_local_endpoints": "Number of active endpoints on this host.",
            "active_local_policies": "Number of active policies on this host.",
            "active_local_selectors": "Number of active selectors on this host.",
            "ipsets_calico": "Number of active Calico IP sets.",
            "cluster_num_hosts": "Total number of hosts in the cluster.",
            "cluster_num_workload_endpoints": "Total number of workload endpoints cluster-wide.",
        }
        for name, doc in gauges.items():
            setattr(self, name, Gauge(f"felix_{name}", doc, registry=r))

    active_local_endpoints: Gauge
    active_local_policies: Gauge
    active_local_selectors: Gauge
    ipsets_calico: Gauge
    cluster_num_hosts: Gauge
    cluster_num_workload_endpoints: Gauge


class ClusterStatsGauges:
    """The calc graph's StatsSink (calico.felix.calc.stats_collector): cluster-wide counts and
    resyncs into Felix's metrics. Called on the calc-graph thread; prometheus-client metrics are
    thread-safe."""

    def __init__(self, metrics: FelixMetrics) -> None:
        self._metrics = metrics

    def on_cluster_stats(self, stats: ClusterStats) -> None:
        self._metrics.cluster_num_hosts.set(stats.num_hosts)
        self._metrics.cluster_num_workload_endpoints.set(stats.num_workload_endpoints)

    def on_resync_started(self) -> None:
        self._metrics.resyncs_started.inc()


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
