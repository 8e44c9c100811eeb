"""Tier and policy ordering (upstream felix/calc/policy_sorter.go); the keys themselves are
``calico.policyeval.ordering``'s, shared with ``calicoctl explain``.

* Tiers: those whose Tier resource exists ("valid") first; then ``order`` ascending with a
  missing order last; ties by name.
* Policies within a tier: ``order`` ascending (missing = +inf); ties by the string
  ``name/namespace/kind``.

A policy whose tier resource does not exist still sorts (into an invalid tier, default action
Deny); an invalid tier disappears once its last policy goes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from calico.model import PolicyKey
from calico.model import values as v1
from calico.policyeval.ordering import (
    DEFAULT_TIER,
    PolicyMeta,
    policy_meta,
    policy_sort_key,
    tier_default_action,
    tier_sort_key,
)

__all__ = ["DEFAULT_TIER", "PolicyMeta", "PolicySorter", "Tier", "policy_meta", "policy_sort_key"]


@dataclass
class Tier:
    name: str
    valid: bool = False
    order: float | None = None
    default_action: str = "Deny"
    policies: dict[PolicyKey, PolicyMeta] = field(default_factory=dict)

    def sort_key(self) -> tuple[bool, bool, float, str]:
        return tier_sort_key(self.name, self.valid, self.order)


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
        action = tier_default_action(value)
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
