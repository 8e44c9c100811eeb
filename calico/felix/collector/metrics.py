"""The flow collector's Prometheus metrics, under the names upstream Felix's collector exports.

Only names upstream's collector registers are used (felix/collector and its lookups caches):
the two processing-latency histograms and the cache-size gauges. Gauges are read at scrape time
from the collector's own state (``CollectorMetrics.collect``), so the hot path pays nothing for
them; the histograms are observed per NFLOG batch and per conntrack dump or DESTROY-event batch
(upstream observes per packet and per conntrack batch: a per-packet observation would cost the
collector more than a tenth of its packet budget here).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector as PromCollector

from calico.proto.goldmane import api_pb2 as pb

ACTION_LABELS = {pb.Allow: "allow", pb.Deny: "deny"}  # a flow's action is its verdict


class CollectorMetrics(PromCollector):
    """Registered in Felix's registry by ``calico.felix.collector.collector.from_config``."""

    def __init__(self, collector: Any, registry: CollectorRegistry) -> None:
        self._collector = collector
        self.conntrack_latency = Histogram(
            "felix_collector_conntrack_processing_latency_seconds",
            "Histogram for measuring the latency of Conntrack processing.",
            registry=registry,
        )
        self.packet_latency = Histogram(
            "felix_collector_packet_info_processing_latency_seconds",
            "Histogram for measuring latency Process Info processing.",
            registry=registry,
        )
        registry.register(self)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        c = self._collector
        endpoints, netsets, policies = c.lookups.sizes()
        for name, doc, value in (
            (
                "felix_collector_epstats",
                "Total number of entries currently residing in the epStats cache.",
                c.agg.tracked,
            ),
            (
                "felix_collector_lookupcache_endpoints",
                "Total number of entries currently residing in the endpoints lookup cache.",
                endpoints,
            ),
            (
                "felix_collector_lookupcache_networksets",
                "Total number of entries currently residing in the network set lookup cache.",
                netsets,
            ),
            (
                "felix_collector_lookups_cache_policies",
                "Total number of entries currently residing in the policies lookup cache.",
                policies,
            ),
        ):
            yield GaugeMetricFamily(name, doc, value=value)
        store = GaugeMetricFamily(
            "felix_collector_allowed_flowlog_aggregator_store",
            "Total number of FlowEntries with a given action currently residing in the "
            "FlowStore cache used by the aggregator.",
            labels=["action"],
        )
        counts = c.agg.pending_flows()
        for action, label in ACTION_LABELS.items():
            store.add_metric([label], counts.get(action, 0))
        yield store

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())
