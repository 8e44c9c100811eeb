"""Flow filters (the proto ``Filter``), compiled once per query into a predicate on keys.

AND across fields, OR within a field, an empty field does not filter. ``Exact`` is equality,
``Fuzzy`` a substring test. A stored name or namespace the UI displays differently also matches
through its display form: "pub"/"pvt" as "PUBLIC NETWORK"/"PRIVATE NETWORK", the global
namespace "Global" as "-" (so Fuzzy "PUBLIC" finds "pub", and "pubsub" is not "PUBLIC
NETWORK"). Policy matches test the enforced and the pending trace; ``pending_actions`` matches
when any pending hit took one of the actions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from calico.goldmane.types import FlowKey, PolicyHit
from calico.proto.goldmane import api_pb2 as pb

# Stored value -> what the UI shows for it; a filter may use either.
DISPLAY_NAMES = {"pub": "PUBLIC NETWORK", "pvt": "PRIVATE NETWORK"}
DISPLAY_NAMESPACES = {"Global": "-"}

StrPred = Callable[[str], bool]


def _string_pred(m: pb.StringMatch, aliases: dict[str, str]) -> StrPred:
    value = m.value
    if m.type == pb.Fuzzy:
        if aliases:
            return lambda s: value in s or (s in aliases and value in aliases[s])
        return lambda s: value in s
    if aliases:
        return lambda s: s == value or aliases.get(s) == value
    return lambda s: s == value


def _any_of(matches: Sequence[pb.StringMatch], aliases: dict[str, str]) -> StrPred | None:
    if not matches:
        return None
    preds = [_string_pred(m, aliases) for m in matches]
    if len(preds) == 1:
        return preds[0]
    return lambda s: any(p(s) for p in preds)


def _optional(m: pb.StringMatch, present: bool) -> StrPred | None:
    # An unset (or empty-valued) StringMatch inside a PolicyMatch matches anything.
    if not present or not m.value:
        return None
    return _string_pred(m, {})


class PolicyPredicate:
    """One ``PolicyMatch`` as a predicate on hits; unset fields match anything."""

    __slots__ = ("action", "kind", "name", "namespace", "tier")

    def __init__(self, m: pb.PolicyMatch) -> None:
        self.kind = m.kind
        self.tier = _optional(m.tier, m.HasField("tier"))
        self.namespace = _optional(m.namespace, m.HasField("namespace"))
        self.name = _optional(m.name, m.HasField("name"))
        self.action = m.action

    def __call__(self, h: PolicyHit) -> bool:
        return (
            (self.kind == pb.KindUnspecified or h.kind == self.kind)
            and (self.tier is None or self.tier(h.tier))
            and (self.namespace is None or self.namespace(h.namespace))
            and (self.name is None or self.name(h.name))
            and (self.action == pb.ActionUnspecified or h.action == self.action)
        )


def match_all(key: FlowKey) -> bool:
    return True


def compile_filter(f: pb.Filter | None) -> Callable[[FlowKey], bool]:
    """The predicate for ``f``; ``None`` or an empty filter gives ``match_all``."""
    if f is None:
        return match_all
    checks: list[Callable[[FlowKey], bool]] = []
    for field, attr, aliases in (
        (f.source_names, "source_name", DISPLAY_NAMES),
        (f.source_namespaces, "source_namespace", DISPLAY_NAMESPACES),
        (f.dest_names, "dest_name", DISPLAY_NAMES),
        (f.dest_namespaces, "dest_namespace", DISPLAY_NAMESPACES),
        (f.protocols, "proto", {}),
    ):
        pred = _any_of(field, aliases)
        if pred is not None:
            checks.append(lambda k, p=pred, a=attr: p(getattr(k, a)))
    if f.dest_ports:
        ports = frozenset(p.port for p in f.dest_ports)
        checks.append(lambda k: k.dest_port in ports)
    if f.actions:
        actions = frozenset(f.actions)
        checks.append(lambda k: k.action in actions)
    if f.pending_actions:
        pending = frozenset(f.pending_actions)
        checks.append(lambda k: any(h.action in pending for h in k.pending))
    if f.policies:
        preds = [PolicyPredicate(m) for m in f.policies]
        checks.append(lambda k: any(p(h) for h in k.enforced + k.pending for p in preds))
    if f.reporter != pb.ReporterUnspecified:
        reporter = f.reporter
        checks.append(lambda k: k.reporter == reporter)
    if not checks:
        return match_all
    if len(checks) == 1:
        return checks[0]
    return lambda key: all(c(key) for c in checks)
