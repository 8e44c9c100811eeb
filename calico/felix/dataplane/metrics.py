"""Felix's Prometheus metrics under upstream's names, and the HTTP server that exposes them.

Counters are exported under their exact upstream names (``felix_resyncs_started``, not
``..._total``): dashboards and alerts written for upstream Felix query those names, and
prometheus-client would otherwise add a ``_total`` suffix. They are typed ``untyped`` for that
reason; ``rate()``/``increase()`` work on them all the same. Cluster-wide counts
(``felix_cluster_num_*``) and resyncs come from the calc graph's StatsCollector (the dataplane
only ever sees local endpoints) through :class:`ClusterStatsGauges`. Felix builds them only
with PrometheusMetricsEnabled (``FelixDaemon._start_metrics``), so a start with metrics off
never imports prometheus_client.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Gauge, Summary

from calico.felix.calc.stats_collector import ClusterStats
from calico.prometheus import ExactCounter, MetricsServer

__all__ = ["ClusterStatsGauges", "ExactCounter", "FelixMetrics", "MetricsServer"]

log = logging.getLogger(__name__)


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
        # The cluster counts change once per endpoint of a snapshot (250,000 at scale): the
        # gauges read the last counts at scrape time instead of two locked sets per change.
        self.cluster_latest = ClusterStats()
        self.cluster_num_hosts.set_function(lambda: self.cluster_latest.num_hosts)
        self.cluster_num_workload_endpoints.set_function(
            lambda: self.cluster_latest.num_workload_endpoints
        )

    def cluster_stats(self) -> ClusterStatsGauges:
        """The calc graph's stats sink feeding these metrics."""
        return ClusterStatsGauges(self)

    active_local_endpoints: Gauge
    active_local_policies: Gauge
    active_local_selectors: Gauge
    ipsets_calico: Gauge
    cluster_num_hosts: Gauge
    cluster_num_workload_endpoints: Gauge
    cluster_latest: ClusterStats


class ClusterStatsGauges:
    """The calc graph's StatsSink (calico.felix.calc.stats_collector): cluster-wide counts and
    resyncs into Felix's metrics. Called on the calc-graph thread; prometheus-client metrics are
    thread-safe."""

    def __init__(self, metrics: FelixMetrics) -> None:
        self._metrics = metrics

    def on_cluster_stats(self, stats: ClusterStats) -> None:
        self._metrics.cluster_latest = stats  # one reference swap: atomic for the scraper

    def on_resync_started(self) -> None:
        self._metrics.resyncs_started.inc()
