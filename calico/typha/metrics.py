"""Typha's Prometheus metrics under upstream's ``typha_*`` names.

Counters keep their exact upstream names (no ``_total`` suffix, exported untyped as Felix's
are), so upstream dashboards work. Per-syncer series carry ``syncer=<type>`` and are created
up front for all four syncer types.
"""

from __future__ import annotations

import logging
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, Summary

from calico.prometheus import ExactCounter, MetricsServer
from calico.syncer.definitions import SYNCER_TYPES

__all__ = ["ExactCounter", "MetricsServer", "TyphaMetrics", "observe_many"]

log = logging.getLogger(__name__)


class TyphaMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry if registry is not None else CollectorRegistry()

        def counter(name: str, doc: str, labelled: bool = True) -> ExactCounter:
            c = ExactCounter(name, doc, ("syncer",) if labelled else ())
            r.register(c)
            if labelled:
                for t in SYNCER_TYPES:
                    c.labels(t)
            return c

        def gauge(name: str, doc: str) -> Gauge:
            g = Gauge(name, doc, ["syncer"], registry=r)
            for t in SYNCER_TYPES:
                g.labels(t)
            return g

        def summary(name: str, doc: str) -> Summary:
            s = Summary(name, doc, ["syncer"], registry=r)
            for t in SYNCER_TYPES:
                s.labels(t)
            return s

        self.connections_accepted = counter(
            "typha_connections_accepted", "Total connections accepted.", labelled=False
        )
        self.connections_dropped = counter(
            "typha_connections_dropped", "Connections dropped (rebalancing, shutdown).", False
        )
        self.connections_rejected = counter(
            "typha_connections_rejected",
            "Connections closed for bad input (handshake, protocol, TLS identity, slow reader).",
            labelled=False,
        )
        self.connections_active = Gauge("typha_connections_active", "Open connections.", registry=r)
        self.connections_streaming = gauge(
            "typha_connections_streaming", "Connections past the handshake, streaming."
        )
        self.breadcrumb_seq_number = gauge(
            "typha_breadcrumb_seq_number", "Sequence number of the latest breadcrumb."
        )
        self.cache_size = gauge("typha_cache_size", "Keys in the snapshot cache.")
        self.snapshot_raw_bytes = gauge("typha_snapshot_raw_bytes", "Uncompressed snapshot size.")
        self.snapshot_compressed_bytes = gauge(
            "typha_snapshot_compressed_bytes", "Compressed snapshot size."
        )
        self.grace_used = counter(
            "typha_connections_grace_used", "Clients that needed the new-client grace period."
        )
        self.breadcrumb_non_block = counter(
            "typha_breadcrumb_non_block", "Next breadcrumb was already there."
        )
        self.breadcrumb_block = counter("typha_breadcrumb_block", "Had to wait for a breadcrumb.")
        self.updates_total = counter("typha_updates_total", "Updates received from the syncer.")
        self.updates_skipped = counter("typha_updates_skipped", "No-op updates skipped.")
        self.snapshots_generated = counter("typha_snapshots_generated", "Snapshots encoded.")
        self.snapshots_reused = counter("typha_snapshots_reused", "Snapshots shared.")
        self.client_snapshot_send_secs = summary(
            "typha_client_snapshot_send_secs", "Time to send a client its snapshot."
        )
        self.client_latency_secs = summary(
            "typha_client_latency_secs", "Breadcrumb age when sent to a client."
        )
        self.client_write_latency_secs = summary(
            "typha_client_write_latency_secs", "Time to write one message to a client."
        )
        self.next_breadcrumb_latency_secs = summary(
            "typha_next_breadcrumb_latency_secs", "Time waiting for the next breadcrumb."
        )
        self.ping_latency = summary("typha_ping_latency", "Ping round trip.")
        self.kvs_per_msg = summary("typha_kvs_per_msg", "KVs per KVs message.")
        self.breadcrumb_size = summary("typha_breadcrumb_size", "Deltas per breadcrumb.")


def observe_many(summary_child: Any, amount: float, n: int) -> None:
    """``n`` observations of ``amount`` in two increments (the fan-out path observes once per
    group of clients, not once per client). Uses ``Summary``'s count/sum values directly: the
    public API has no batched observe."""
    if n <= 0:
        return
    if n == 1:
        summary_child.observe(amount)
        return
    summary_child._count.inc(n)
    summary_child._sum.inc(amount * n)
