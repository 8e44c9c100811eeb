"""Goldmane's ``goldmane_*`` Prometheus metrics, read from the engine at scrape time.

The engine only bumps plain integers and float sums on its event loop (no locks, no
prometheus-client calls on the ingest path); this collector turns them into families when
scraped, from the metrics server's thread (reading ints and ``len()`` is safe under the GIL).
Served by ``calico.prometheus.MetricsServer`` on PROMETHEUS_PORT (0 = off), as upstream.
Upstream's ``goldmane_aggr_flow_index_*`` and ``goldmane_collector_flow_process_latency``
describe its batching index, which this engine does not have, so they are not exported.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from calico.goldmane.server import Goldmane


class GoldmaneCollector(Collector):
    def __init__(self, gm: Goldmane) -> None:
        self.gm = gm

    def collect(self) -> Iterator[Metric]:
        gm = self.gm
        yield CounterMetricFamily(
            "goldmane_aggr_received_flows", "Flows received by the aggregator.", gm.received
        )
        yield CounterMetricFamily(
            "goldmane_aggr_dropped_flows",
            "Flows dropped (start time outside the bucket ring).",
            gm.dropped,
        )
        yield GaugeMetricFamily(
            "goldmane_aggr_num_unique_flows", "Distinct flow keys held.", gm.ring.num_keys
        )
        yield SummaryMetricFamily(
            "goldmane_aggr_rollover_duration_ms",
            "Time spent rolling the bucket ring over, in milliseconds.",
            count_value=gm.rollovers,
            sum_value=gm.rollover_ms,
        )
        yield SummaryMetricFamily(
            "goldmane_aggr_rollover_latency_ms",
            "How late rollovers ran against their schedule, in milliseconds.",
            count_value=gm.rollovers,
            sum_value=gm.rollover_late_ms,
        )
        yield SummaryMetricFamily(
            "goldmane_aggr_backfill_latency_ms",
            "Time spent backfilling new streams, in milliseconds.",
            count_value=gm.backfills,
            sum_value=gm.backfill_ms,
        )
        # A counter under exactly upstream's name (no _total), so untyped as calico.prometheus.
        name = "goldmane_collector_received_flows"
        by_source = Metric(name, "Flows received per collector source (peer host).", "unknown")
        for source, count in sorted(gm.received_by_peer.items()):
            by_source.add_sample(name, {"source": source}, count)
        yield by_source
        yield GaugeMetricFamily(
            "goldmane_collector_num_clients", "Connected flow collectors.", gm.collectors
        )
        yield GaugeMetricFamily("goldmane_num_streams", "Open flow streams.", len(gm.streams))


def registry_for(gm: Goldmane) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(GoldmaneCollector(gm))
    return registry
