"""Proto messages <-> engine types (``calico.goldmane.types``), at the gRPC edge only."""

from __future__ import annotations

from calico.goldmane.types import Counters, Flow, FlowKey, PolicyHit, sample_union
from calico.proto.goldmane import api_pb2 as pb


def hit_from_proto(h: pb.PolicyHit) -> PolicyHit:
    trigger = hit_from_proto(h.trigger) if h.HasField("trigger") else None
    return PolicyHit(
        h.kind, h.namespace, h.name, h.tier, h.action, h.policy_index, h.rule_index, trigger
    )


def hit_to_proto(h: PolicyHit) -> pb.PolicyHit:
    msg = pb.PolicyHit(
        kind=h.kind,
        namespace=h.namespace,
        name=h.name,
        tier=h.tier,
        action=h.action,
        policy_index=h.policy_index,
        rule_index=h.rule_index,
    )
    if h.trigger is not None:
        msg.trigger.CopyFrom(hit_to_proto(h.trigger))
    return msg


def key_from_proto(k: pb.FlowKey) -> FlowKey:
    return FlowKey(
        k.source_name,
        k.source_namespace,
        k.source_type,
        k.dest_name,
        k.dest_namespace,
        k.dest_type,
        k.dest_port,
        k.dest_service_name,
        k.dest_service_namespace,
        k.dest_service_port_name,
        k.dest_service_port,
        k.proto,
        k.reporter,
        k.action,
        tuple(hit_from_proto(h) for h in k.policies.enforced_policies),
        tuple(hit_from_proto(h) for h in k.policies.pending_policies),
        k.source_ip,
    )


def key_to_proto(k: FlowKey) -> pb.FlowKey:
    return pb.FlowKey(
        source_name=k.source_name,
        source_namespace=k.source_namespace,
        source_type=k.source_type,
        dest_name=k.dest_name,
        dest_namespace=k.dest_namespace,
        dest_type=k.dest_type,
        dest_port=k.dest_port,
        dest_service_name=k.dest_service_name,
        dest_service_namespace=k.dest_service_namespace,
        dest_service_port_name=k.dest_service_port_name,
        dest_service_port=k.dest_service_port,
        proto=k.proto,
        reporter=k.reporter,
        action=k.action,
        policies=pb.PolicyTrace(
            enforced_policies=[hit_to_proto(h) for h in k.enforced],
            pending_policies=[hit_to_proto(h) for h in k.pending],
        ),
        source_ip=k.source_ip,
    )


def flow_from_proto(f: pb.Flow, key: FlowKey | None = None) -> Flow:
    """``key``, when given, is ``f.Key`` already converted (see ``KeyCache``)."""
    return Flow(
        key=key_from_proto(f.Key) if key is None else key,
        start_time=f.start_time,
        end_time=f.end_time,
        source_labels=frozenset(f.source_labels),
        dest_labels=frozenset(f.dest_labels),
        counters=Counters(
            f.packets_in,
            f.packets_out,
            f.bytes_in,
            f.bytes_out,
            f.num_connections_started,
            f.num_connections_completed,
            f.num_connections_live,
        ),
        # A sender may exceed the bound; the engine never holds more than it.
        source_ips=sample_union(frozenset(), frozenset(f.source_ips)),
        source_ports=sample_union(frozenset(), frozenset(f.source_ports)),
    )


def flow_to_proto(f: Flow) -> pb.Flow:
    c = f.counters
    return pb.Flow(
        Key=key_to_proto(f.key),
        start_time=f.start_time,
        end_time=f.end_time,
        source_labels=sorted(f.source_labels),
        dest_labels=sorted(f.dest_labels),
        packets_in=c.packets_in,
        packets_out=c.packets_out,
        bytes_in=c.bytes_in,
        bytes_out=c.bytes_out,
        num_connections_started=c.connections_started,
        num_connections_completed=c.connections_completed,
        num_connections_live=c.connections_live,
        source_ips=sorted(f.source_ips),
        source_ports=sorted(f.source_ports),
    )


class KeyCache:
    """Converted keys by their wire bytes: a node sends the same keys every flush interval.

    Deterministic serialization makes equal keys equal bytes; the cache is dropped whole when
    it reaches ``limit`` entries, which bounds memory without per-entry bookkeeping.
    """

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = limit
        self._keys: dict[bytes, FlowKey] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def get(self, k: pb.FlowKey) -> FlowKey:
        raw = k.SerializeToString(deterministic=True)
        key = self._keys.get(raw)
        if key is None:
            if len(self._keys) >= self.limit:
                self._keys.clear()
            key = self._keys[raw] = key_from_proto(k)
        return key
