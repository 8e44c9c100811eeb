"""Tier and policy ordering keys (upstream felix/calc/policy_sorter.go), shared by Felix's
PolicySorter and the offline evaluator so both put policies in the same order.

* Tiers: those whose Tier resource exists ("valid") first; then ``order`` ascending with a
  missing order last; ties by name.
* Policies within a tier: ``order`` ascending (missing = +inf); ties by the string
  ``name/namespace/kind``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from calico.model import PolicyKey
from calico.model import values as v1

DEFAULT_TIER = "default"


def is_staged(kind: str) -> bool:
    """Staged kinds are matched and sorted but never enforced (flow-log "what if" only)."""
    return kind.startswith("Staged")


@dataclass(frozen=True, slots=True)
class PolicyMeta:
    """The parts of a policy that decide where and how it appears in an endpoint's tiers."""

    tier: str
    order: float = math.inf
    ingress: bool = True
    egress: bool = True
    untracked: bool = False
    pre_dnat: bool = False
    apply_on_forward: bool = False
    staged: bool = False


def policy_meta(key: PolicyKey, value: v1.Policy) -> PolicyMeta:
    """Extract the sort/split metadata; an empty ``types`` means ingress and egress."""
    types = [t.lower() for t in value.types]
    return PolicyMeta(
        tier=value.tier or DEFAULT_TIER,
        order=math.inf if value.order is None else value.order,
        ingress=not types or "ingress" in types,
        egress=not types or "egress" in types,
        untracked=value.untracked,
        pre_dnat=value.pre_dnat,
        apply_on_forward=value.apply_on_forward,
        staged=is_staged(key.kind),
    )


def policy_sort_key(key: PolicyKey, meta: PolicyMeta) -> tuple[float, str]:
    return (meta.order, f"{key.name}/{key.namespace}/{key.kind}")


def tier_sort_key(name: str, valid: bool, order: float | None) -> tuple[bool, bool, float, str]:
    """Valid tiers first, then by order (missing last), then by name."""
    return (not valid, order is None, order or 0.0, name)


def tier_default_action(value: v1.Tier | None) -> str:
    """A tier's end-of-tier action: Pass only when it says so; a missing tier denies."""
    return "Pass" if value is not None and value.default_action == "Pass" else "Deny"
