"""Policy and tier names and defaults without pydantic: the built-in tiers, the name rules of
the policy kinds and the default ``types``. ``calico.api.policy`` validates with them, and the
lean reader of stored policies (``calico.model.processors.leanpolicy``) checks with the same
objects, so both accept the same names and fill the same defaults.
"""

from __future__ import annotations

import re
from typing import Any

DEFAULT_TIER = "default"
# Upstream's built-in tiers (EnsureInitialized creates all three on every datastore): name ->
# (order, defaultAction). ClusterNetworkPolicy Admin/Baseline policies live in the kube-* ones.
BUILT_IN_TIERS: dict[str, tuple[float, str]] = {
    "default": (1_000_000.0, "Deny"),
    "kube-admin": (1_000.0, "Pass"),
    "kube-baseline": (10_000_000.0, "Pass"),
}
WELL_KNOWN_TIER_ORDERS = {name: order for name, (order, _) in BUILT_IN_TIERS.items()}

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = rf"{_LABEL}(\.{_LABEL})*"
_NP_NAME = re.compile(rf"^({_LABEL}(\.{_LABEL})?|(knp|ossg)\.default\.{_SUBDOMAIN})$")
_GNP_NAME = re.compile(rf"^({_LABEL}\.)?{_LABEL}$")


def default_policy_types(ingress: list[Any] | None, egress: list[Any] | None) -> list[str]:
    """Upstream's rule: Ingress unless there are only egress rules; both if both."""
    if egress:
        return ["Ingress", "Egress"] if ingress else ["Egress"]
    return ["Ingress"]


def policy_base_name(name: str, tier: str | None) -> str:
    """The policy name without a ``<tier>.`` prefix (upstream accepts it either way)."""
    if tier and tier != DEFAULT_TIER and name.startswith(f"{tier}."):
        return name[len(tier) + 1 :]
    return name


def _name_problem(name: str, pattern: re.Pattern[str], what: str) -> str | None:
    if len(name) > 253:
        return f"name is too long by {len(name) - 253} characters (maximum 253)"
    if not pattern.match(name):
        return (
            f"name {name!r} is invalid: {what} names must be a DNS-1123 label (lower-case "
            "alphanumeric characters or '-'), optionally prefixed with '<tier>.'"
        )
    return None
