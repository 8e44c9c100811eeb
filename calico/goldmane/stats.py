"""Statistics (the ``Statistics.List`` API): counters per policy or per policy rule.

As upstream: a flow contributes once to each distinct rule it hit, enforced or pending (a rule
in both traces counts once, with the first action seen), under that hit's action (allowed,
denied, passed). An EndOfTier hit counts for the policy that triggered it. "in" and "out" are
the flow's inbound and outbound packets or bytes; live connections count as "in" for ingress
(destination-reported) flows and "out" for egress (source-reported) ones. Grouping by policy
sums a policy's rules (direction Any); grouping by rule keys on action, rule index and
direction. Unlike upstream, a ``policy_match`` action filters by the hit's action (upstream
compares it with the policy-level key, which has none, so it matched nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from calico.goldmane.types import Flow, PolicyHit
from calico.proto.goldmane import api_pb2 as pb

StatKey = tuple[int, str, str, str, int, int, int]  # kind, ns, name, tier, action, rule, dir

_SLOT = {pb.Allow: 0, pb.Deny: 1, pb.Pass: 2}


def _in_out(flow: Flow, stat_type: int, ingress: bool) -> tuple[int, int]:
    c = flow.counters
    if stat_type == pb.ByteCount:
        return c.bytes_in, c.bytes_out
    if stat_type == pb.LiveConnectionCount:
        return (c.connections_live, 0) if ingress else (0, c.connections_live)
    return c.packets_in, c.packets_out


def _rule_keys(flow: Flow) -> dict[StatKey, int]:
    """The distinct rules ``flow`` hit -> the action taken (first seen wins)."""
    direction = pb.Egress if flow.key.reporter == pb.Src else pb.Ingress
    rules: dict[StatKey, int] = {}
    for h in flow.key.enforced + flow.key.pending:
        meta = h.trigger if h.kind == pb.EndOfTier and h.trigger is not None else h
        rk = (meta.kind, meta.namespace, meta.name, meta.tier, h.action, h.rule_index, direction)
        rules.setdefault(rk, h.action)
    return rules


def _as_hit(k: StatKey) -> PolicyHit:
    return PolicyHit(k[0], k[1], k[2], k[3], k[4], 0, k[5])


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
            value_in, value_out = _in_out(flow, req.type, flow.key.reporter != pb.Src)
            for rk, action in _rule_keys(flow).items():
                slot = _SLOT.get(action)
                if slot is None or not self._matches(_as_hit(rk)):
                    continue
                if req.group_by != pb.PolicyRule:
                    rk = (rk[0], rk[1], rk[2], rk[3], pb.ActionUnspecified, 0, pb.Any)
                counts = point.setdefault(rk, [0] * 6)
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
