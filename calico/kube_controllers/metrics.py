"""kube-controllers' Prometheus metrics under upstream's names (default port 9094).

Gauges ``ipam_allocations_in_use``, ``ipam_allocations_borrowed``,
``ipam_allocations_gc_candidates``, ``ipam_blocks`` (labels ``ippool``, ``node``),
``ipam_ippool_size`` (``ippool``), the legacy per-node ``ipam_blocks_per_node``,
``ipam_allocations_per_node``, ``ipam_allocations_borrowed_per_node`` (``node``), and the
counter ``ipam_allocations_gc_reclamations`` — exported under exactly that name (upstream's
Go counter has no ``_total``), so it is a small collector of its own. Gauges are rewritten
from every GC pass: series for pools/nodes that disappeared are dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.exposition import MetricsHandler
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from calico.kube_controllers.ipamgc import PassResult

PoolNode = tuple[str, str]


class _Reclamations(Collector):
    def __init__(self) -> None:
        self.values: dict[PoolNode, float] = {}
        self.lock = threading.Lock()

    def add(self, counts: dict[PoolNode, int]) -> None:
        with self.lock:
            for key, n in counts.items():
                self.values[key] = self.values.get(key, 0.0) + n

    def collect(self) -> Iterator[Metric]:
        metric = Metric(
            "ipam_allocations_gc_reclamations",
            "Count of Calico IP allocations that have been reclaimed by the GC.",
            "counter",
        )
        with self.lock:
            for (pool, node), value in sorted(self.values.items()):
                metric.add_sample(
                    "ipam_allocations_gc_reclamations", {"ippool": pool, "node": node}, value
                )
        yield metric


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
        self.reclamations = _Reclamations()
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
        self.reclamations.add(result.reclaimed)


class MetricsServer:
    """``/metrics`` on ``host:port`` (0 = a free port) in a daemon thread."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        handler = MetricsHandler.factory(registry)
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
