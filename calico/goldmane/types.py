"""The engine's own flow types: hashable keys, summed counters, intersected labels, bounded
source samples.

Protobuf messages are neither hashable nor cheap to compare, so the engine keys its maps on
these tuples and converts at the gRPC edge (``calico.goldmane.convert``). Enum-valued fields
hold the proto's integer values (``calico.proto.goldmane.api_pb2``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, TypeVar

SAMPLE_SIZE = 10  # source addresses / ports a flow carries (calico-py extension)
_T = TypeVar("_T", str, int)


def sample_union(a: frozenset[_T], b: frozenset[_T]) -> frozenset[_T]:
    """The ``SAMPLE_SIZE`` smallest of ``a | b``: associative and commutative, so a flow's
    sample does not depend on the order its parts were aggregated in."""
    if not b or b <= a:
        return a
    u = a | b
    return u if len(u) <= SAMPLE_SIZE else frozenset(sorted(u)[:SAMPLE_SIZE])


class PolicyHit(NamedTuple):
    kind: int
    namespace: str
    name: str
    tier: str
    action: int
    policy_index: int
    rule_index: int
    trigger: PolicyHit | None = None


class FlowKey(NamedTuple):
    source_name: str = ""
    source_namespace: str = ""
    source_type: int = 0
    dest_name: str = ""
    dest_namespace: str = ""
    dest_type: int = 0
    dest_port: int = 0
    dest_service_name: str = ""
    dest_service_namespace: str = ""
    dest_service_port_name: str = ""
    dest_service_port: int = 0
    proto: str = ""
    reporter: int = 0
    action: int = 0
    enforced: tuple[PolicyHit, ...] = ()
    pending: tuple[PolicyHit, ...] = ()
    source_ip: str = ""  # extension: only for sources no endpoint owns


@dataclass(slots=True)
class Counters:
    packets_in: int = 0
    packets_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    connections_started: int = 0
    connections_completed: int = 0
    connections_live: int = 0

    def add(self, other: Counters) -> None:
        self.packets_in += other.packets_in
        self.packets_out += other.packets_out
        self.bytes_in += other.bytes_in
        self.bytes_out += other.bytes_out
        self.connections_started += other.connections_started
        self.connections_completed += other.connections_completed
        self.connections_live += other.connections_live

    def copy(self) -> Counters:
        c = Counters()
        c.add(self)
        return c


@dataclass(slots=True)
class Flow:
    """One flow record: a key, its time span, labels, counters and source samples.

    Ingested flows carry what the reporter saw; query results carry the aggregate over the
    buckets asked for (start of the first, end of the last; labels common to all).
    """

    key: FlowKey
    start_time: int
    end_time: int
    source_labels: frozenset[str]
    dest_labels: frozenset[str]
    counters: Counters
    source_ips: frozenset[str] = frozenset()
    source_ports: frozenset[int] = frozenset()

    def fold_in(self, other: Flow) -> None:
        """Sum counters, intersect labels, merge samples (the span is the caller's)."""
        self.counters.add(other.counters)
        self.source_labels &= other.source_labels
        self.dest_labels &= other.dest_labels
        self.source_ips = sample_union(self.source_ips, other.source_ips)
        self.source_ports = sample_union(self.source_ports, other.source_ports)

    def merge(self, other: Flow) -> None:
        """Fold ``other`` (same key) in and widen the span."""
        self.fold_in(other)
        self.start_time = min(self.start_time, other.start_time)
        self.end_time = max(self.end_time, other.end_time)

    def copy(self) -> Flow:
        return Flow(
            self.key,
            self.start_time,
            self.end_time,
            self.source_labels,
            self.dest_labels,
            self.counters.copy(),
            self.source_ips,
            self.source_ports,
        )
