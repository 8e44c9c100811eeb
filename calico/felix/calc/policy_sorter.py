"""Tier and policy ordering (upstream felix/calc/policy_sorter.go).

* Tiers: those whose Tier resource exists ("valid") first; then ``order`` ascending with a
  missing order last; ties by name.
* Policies within a tier: ``order`` ascending (missing = +inf); ties by the string
  ``name/namespace/kind``.

A policy whose tier resource does not exist still sorts (into an invalid tier, default action
Deny); an invalid tier disappears once its last policy goes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from calico.felix.calc.rule_scanner import is_staged
from calico.model import PolicyKey
from calico.model import values as v1

DEFAULT_TIER = "default"


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


@dataclass
class Tier:
    name: str
    valid: bool = False
    order: float | None = None
    default_action: str = "Deny"
    policies: dict[PolicyKey, PolicyMeta] = field(default_factory=dict)

    def sort_key(self) -> tuple[bool, bool, float, str]:
        return (not self.valid, self.order is None, self.order or 0.0, self.name)


class PolicySorter:
    """Holds every tier and policy's metadata; answers "in what order" questions."""

    def __init__(self) -> None:
        self._tiers: dict[str, Tier] = {}
        self._tier_of: dict[PolicyKey, str] = {}
        self._rank: dict[str, int] | None = None

    def on_tier(self, name: str, value: v1.Tier | None) -> bool:
        """Called for TierKey updates; returns True if ordering or default action changed."""
        tier = self._tiers.get(name)
        if value is None:
            if tier is None or not tier.valid:
                return False
            tier.valid, tier.order, tier.default_action = False, None, "Deny"
            if not tier.policies:
                del self._tiers[name]
            self._rank = None
            return True
        action = "Pass" if value.default_action == "Pass" else "Deny"
        new = (True, value.order, action)
        if tier is None:
            tier = self._tiers[name] = Tier(name)
        elif (tier.valid, tier.order, tier.default_action) == new:
            return False
        tier.valid, tier.order, tier.default_action = new
        self._rank = None
        return True

    def on_policy(self, key: PolicyKey, meta: PolicyMeta | None) -> bool:
        """Called for PolicyKey updates; returns True if the policy's metadata changed."""
        old_tier = self._tier_of.get(key)
        old = self._tiers[old_tier].policies.get(key) if old_tier is not None else None
        if old == meta:
            return False
        if old_tier is not None:
            tier = self._tiers[old_tier]
            del tier.policies[key]
            del self._tier_of[key]
            if not tier.policies and not tier.valid:
                del self._tiers[old_tier]
                self._rank = None
        if meta is not None:
            tier = self._tiers.get(meta.tier)
            if tier is None:
                tier = self._tiers[meta.tier] = Tier(meta.tier)
                self._rank = None
            tier.policies[key] = meta
            self._tier_of[key] = meta.tier
        return True

    def tier(self, name: str) -> Tier | None:
        return self._tiers.get(name)

    def meta(self, key: PolicyKey) -> PolicyMeta | None:
        name = self._tier_of.get(key)
        return None if name is None else self._tiers[name].policies.get(key)

    def policies_in_tier(self, name: str) -> list[PolicyKey]:
        tier = self._tiers.get(name)
        return list(tier.policies) if tier else []

    def sorted_tiers(self) -> list[Tier]:
        return sorted(self._tiers.values(), key=Tier.sort_key)

    def tier_rank(self, name: str) -> int:
        """Position of ``name`` among all tiers (cached until a tier changes)."""
        if self._rank is None:
            self._rank = {t.name: i for i, t in enumerate(self.sorted_tiers())}
        return self._rank[name]

    def sort_policies(self, keys: list[PolicyKey]) -> list[tuple[Tier, list[PolicyKey]]]:
        """Group ``keys`` by tier, tiers and policies in enforcement order (empty tiers omitted)."""
        decorated = []
        for key in keys:
            tier_name = self._tier_of.get(key)
            if tier_name is None:
                continue
            meta = self._tiers[tier_name].policies[key]
            decorated.append((self.tier_rank(tier_name), policy_sort_key(key, meta), key))
        decorated.sort()
        out: list[tuple[Tier, list[PolicyKey]]] = []
        for _rank, _sk, key in decorated:
            tier = self._tiers[self._tier_of[key]]
            if not out or out[-1][0] is not tier:
                out.append((tier, []))
            out[-1][1].append(key)
        return out
