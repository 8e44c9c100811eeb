"""How a policy or profile is named in Felix's nft chain names (``gnp/web``, ``np/prod/db``,
``kns.prod``), shared by Felix's rule renderer and ``calicoctl explain --live``, which finds the
chains of a computed decision step in the kernel's table by these names.

A rule's position in its policy's rule list is in its nft comment (``rule <index> <id>``), so
the counters of the nft rule(s) one policy rule became can be found again (design/explain.md
"`--live` (calico.calicoctl.explain_live)").
"""

from __future__ import annotations

import re

FILTER_LAYER = "filter"  # workload chains and their policies live in the filter layer
WL_TO_PREFIX = "cali-tw-"  # to workload: the workload's ingress policy
WL_FROM_PREFIX = "cali-fw-"  # from workload: egress policy
POLICY_INBOUND_PREFIX = "cali-pi-"
POLICY_OUTBOUND_PREFIX = "cali-po-"
PROFILE_INBOUND_PREFIX = "cali-pri-"
PROFILE_OUTBOUND_PREFIX = "cali-pro-"

KIND_SHORT = {
    "NetworkPolicy": "np",
    "GlobalNetworkPolicy": "gnp",
    "KubernetesNetworkPolicy": "knp",
    "KubernetesClusterNetworkPolicy": "kcnp",
    "ClusterNetworkPolicy": "kcnp",
    "StagedNetworkPolicy": "snp",
    "StagedGlobalNetworkPolicy": "sgnp",
    "StagedKubernetesNetworkPolicy": "sknp",
}

_RULE_COMMENT = re.compile(r"(?:^|;)\s*rule (\d+)(?:\s|$)")


def short_kind(kind: str, namespace: str) -> str:
    """The kind's chain-name abbreviation; a kindless ID is np or gnp by its namespace."""
    if not kind:
        return "np" if namespace else "gnp"
    return KIND_SHORT.get(kind, kind.lower())


def policy_chain_id(kind: str, namespace: str, name: str) -> str:
    """The policy's name in chain names: ``gnp/name`` or ``np/namespace/name``."""
    parts = [short_kind(kind, namespace)]
    if namespace:
        parts.append(namespace)
    parts.append(name)
    return "/".join(parts)


def rule_comment(index: int, rule_id: str) -> str:
    """The human comment of the nft rule(s) rendered from rule ``index`` of a rule list."""
    return f"rule {index} {rule_id}" if rule_id else f"rule {index}"


def rule_index(comment: str | None) -> int | None:
    """The rule-list index in a comment :func:`rule_comment` wrote (after the table's
    ``cali:<hash>;``), None for other rules."""
    m = _RULE_COMMENT.search(comment or "")
    return int(m.group(1)) if m else None
