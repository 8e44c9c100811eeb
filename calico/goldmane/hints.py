"""Filter hints: the distinct values a flow field takes, for the UI's filter drop-downs.

Names and namespaces come from the flow keys (empty values skipped); policy tiers, names,
kinds and namespaces from every hit of both traces, except Profile hits (not policies a user
filters on). An EndOfTier hit stands for the policy that triggered it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from calico.goldmane.queries import QueryError
from calico.goldmane.types import FlowKey, PolicyHit
from calico.proto.goldmane import api_pb2 as pb

_KEY_FIELDS = {
    pb.FilterTypeDestName: "dest_name",
    pb.FilterTypeSourceName: "source_name",
    pb.FilterTypeDestNamespace: "dest_namespace",
    pb.FilterTypeSourceNamespace: "source_namespace",
}


def _hit_value(field: str) -> Callable[[PolicyHit], str]:
    if field == "kind":
        return lambda h: pb.PolicyKind.Name(h.kind)
    return lambda h: getattr(h, field)


_HIT_FIELDS = {
    pb.FilterTypePolicyTier: _hit_value("tier"),
    pb.FilterTypePolicyName: _hit_value("name"),
    pb.FilterTypePolicyKind: _hit_value("kind"),
    pb.FilterTypePolicyNamespace: _hit_value("namespace"),
}


def hint_values(filter_type: int) -> Callable[[FlowKey], Iterable[str]]:
    """The function giving a key's values for ``filter_type``; QueryError if unsupported."""
    attr = _KEY_FIELDS.get(filter_type)
    if attr is not None:
        return lambda k: (v,) if (v := getattr(k, attr)) else ()
    value = _HIT_FIELDS.get(filter_type)
    if value is None:
        name = pb.FilterType.Name(filter_type) if filter_type in pb.FilterType.values() else ""
        raise QueryError(f"unsupported filter type '{name or filter_type}'")

    def values(k: FlowKey) -> Iterable[str]:
        for h in k.enforced + k.pending:
            if h.kind == pb.Profile:
                continue
            if h.kind == pb.EndOfTier and h.trigger is not None:
                h = h.trigger
            v = value(h)
            if v:
                yield v

    return values
