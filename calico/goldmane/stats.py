"""Statistics (the ``Statistics.List`` API): counters per policy or per policy rule.

Every enforced hit of a flow contributes the flow's counters under the hit's action (allowed,
denied, passed). "in" and "out" are the flow's inbound and outbound packets or bytes; a live
connection count goes to "in" for flows reported by the destination and to "out" for flows
reported by the source. Grouping by rule also splits by direction: ingress rules are the ones
a destination reports, egress rules the ones a source reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from calico.goldmane.types import Flow, PolicyHit
from calico.proto.goldmane import api_pb2 as pb

StatKey = tuple[int, str, str, str, int, int, int]  # kind, ns, name, tier, action, rule, dir

_SLOT = {pb.Allow: 0, pb.Deny: 1, pb.Pass: 2}
_DIRECTION = {pb.Dst: pb.Ingress, pb.Src: pb.Egress}


def _in_out(flow: Flow, stat_type: int) -> tuple[int, int]:
    c = flow.counters
    if stat_type == pb.ByteCount:
        return c.bytes_in, c.bytes_out
    if stat_type == pb.LiveConnectionCount:
        if flow.key.reporter == pb.Dst:
            return c.connections_live, 0
        return 0, c.connections_live
    return c.packets_in, c.packets_out


def _stat_key(h: PolicyHit, group_by: int, reporter: int) -> StatKey:
    if group_by == pb.PolicyRule:
        direction = _DIRECTION.get(reporter, pb.Any)
        return (h.kind, h.namespace, h.name, h.tier, h.action, h.rule_index, direction)
    return (h.kind, h.namespace, h.name, h.tier, pb.ActionUnspecified, 0, pb.Any)


@dataclass
class _Series:
    x: list[int] = field(default_factory=list)
    values: list[list[int]] = field(default_factory=list)  # per point: 6 counters


class StatisticsBuilder:
    """Feed it each bucket's flows oldest first, then ``results()``."""

    def __init__(self, req: pb.StatisticsRequest, hit_matches: Callable[[PolicyHit], bool]) -> None:
        self._req = req
        self._matches = hit_matches
        self._series: dict[StatKey, _Series] = {}

    def add_bucket(self, bucket_start: int, flows: Iterable[Flow]) -> None:
        req = self._req
        point: dict[StatKey, list[int]] = {}
        for flow in flows:
            value_in, value_out = _in_out(flow, req.type)
            for h in flow.key.enforced:
                slot = _SLOT.get(h.action)
                if slot is None or not self._matches(h):
                    continue
                counts = point.setdefault(_stat_key(h, req.group_by, flow.key.reporter), [0] * 6)
                counts[2 * slot] += value_in
                counts[2 * slot + 1] += value_out
        for key, counts in point.items():
            series = self._series.setdefault(key, _Series())
            if req.time_series or not series.values:
                series.x.append(bucket_start)
                series.values.append(counts)
            else:
                series.values[0] = [a + b for a, b in zip(series.values[0], counts, strict=True)]

    def results(self) -> list[pb.StatisticsResult]:
        out = []
        for key in sorted(self._series, key=lambda k: (k[3], k[2], k[1], k[0], k[5], k[4], k[6])):
            kind, ns, name, tier, action, rule, direction = key
            series = self._series[key]
            cols = list(zip(*series.values, strict=True))
            out.append(
                pb.StatisticsResult(
                    policy=pb.PolicyHit(
                        kind=kind,
                        namespace=ns,
                        name=name,
                        tier=tier,
                        action=action,
                        rule_index=rule,
                    ),
                    direction=direction,
                    group_by=self._req.group_by,
                    type=self._req.type,
                    allowed_in=cols[0],
                    allowed_out=cols[1],
                    denied_in=cols[2],
                    denied_out=cols[3],
                    passed_in=cols[4],
                    passed_out=cols[5],
                    x=series.x if self._req.time_series else [],
                )
            )
        return out
