"""kube-controllers' Prometheus metrics under upstream's names (default port 9094).

Gauges ``ipam_allocations_in_use``, ``ipam_allocations_borrowed``,
``ipam_allocations_gc_candidates``, ``ipam_blocks`` (labels ``ippool``, ``node``),
``ipam_ippool_size`` (``ippool``), the legacy per-node ``ipam_blocks_per_node``,
``ipam_allocations_per_node``, ``ipam_allocations_borrowed_per_node`` (``node``), and the
counter ``ipam_allocations_gc_reclamations`` (``ippool``, ``node``). Upstream's Go counter has
no ``_total``, so it is the shared :class:`calico.prometheus.ExactCounter` (the series name
exactly as upstream's, exported untyped as Felix's and Typha's counters are). Gauges are
rewritten from every GC pass: series for pools/nodes that disappeared are dropped.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from calico.kube_controllers.ipamgc import PassResult
from calico.prometheus import ExactCounter, MetricsServer

__all__ = ["IPAMMetrics", "MetricsServer"]


class IPAMMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry

        def gauge(name: str, doc: str, labels: tuple[str, ...]) -> Gauge:
            return Gauge(name, doc, labels, registry=r)

        pn = ("ippool", "node")
        self.in_use = gauge("ipam_allocations_in_use", "IP allocations in use.", pn)
        self.borrowed = gauge("ipam_allocations_borrowed", "Borrowed IP allocations.", pn)
        self.candidates = gauge("ipam_allocations_gc_candidates", "Possible leaks.", pn)
        self.blocks = gauge("ipam_blocks", "IPAM blocks.", pn)
        self.pool_size = gauge("ipam_ippool_size", "Addresses in the pool CIDR.", ("ippool",))
        self.blocks_per_node = gauge("ipam_blocks_per_node", "Blocks by affine node.", ("node",))
        self.allocs_per_node = gauge("ipam_allocations_per_node", "Allocations by node.", ("node",))
        self.borrowed_per_node = gauge(
            "ipam_allocations_borrowed_per_node", "Borrowed allocations by node.", ("node",)
        )
        self.reclamations = ExactCounter(
            "ipam_allocations_gc_reclamations",
            "Count of Calico IP allocations that have been reclaimed by the GC.",
            pn,
        )
        r.register(self.reclamations)

    def record(self, result: PassResult) -> None:
        for g, counts in (
            (self.in_use, result.in_use),
            (self.borrowed, result.borrowed),
            (self.candidates, result.gc_candidates),
            (self.blocks, result.blocks),
        ):
            g.clear()
            for (pool, node), n in counts.items():
                g.labels(pool, node).set(n)
        self.pool_size.clear()
        for pool, size in result.pool_sizes.items():
            self.pool_size.labels(pool).set(size)
        for g, counts in (
            (self.blocks_per_node, result.blocks),
            (self.allocs_per_node, result.in_use),
            (self.borrowed_per_node, result.borrowed),
        ):
            per_node: dict[str, int] = {}
            for (_, node), n in counts.items():
                per_node[node] = per_node.get(node, 0) + n
            g.clear()
            for node, n in per_node.items():
                g.labels(node).set(n)
        for key, n in result.reclaimed.items():
            self.reclamations.add(key, n)
