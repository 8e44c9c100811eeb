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
# Policy group chains: consecutive same-selector policies of an endpoint's tier, jumped to once
# (calico.felix.rules.groups); ``--live`` follows them to the policy chains they jump to.
GROUP_INBOUND_PREFIX = "cali-gi-"
GROUP_OUTBOUND_PREFIX = "cali-go-"
HOST_FROM_PREFIX = "cali-fh-"  # from host endpoint (arriving): its ingress policy
HOST_TO_PREFIX = "cali-th-"  # to host endpoint (leaving): egress policy
HOST_FROM_FWD_PREFIX = "cali-fhfw-"  # the same for forwarded traffic: applyOnForward policy
HOST_TO_FWD_PREFIX = "cali-thfw-"
# The key the all-interfaces (``interfaceName: "*"``) endpoint is resolved under, and the suffix
# of its chains (upstream's name): longer than IFNAMSIZ, so no real interface can clash with it.
ALL_INTERFACES = "any-interface-at-all"
# explain's layer names (``calico.policyeval.evaluate``) -> the nft layer their chains are in
NFT_LAYER = {"untracked": "raw", "preDNAT": "mangle", "normal": "filter", "forward": "filter"}

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


def host_endpoint_chain(iface: str, layer: str, inbound: bool) -> str | None:
    """The nft chain of a host endpoint on ``iface`` (``*`` for the all-interfaces one) in
    explain's ``layer`` (normal, untracked, preDNAT, forward), layer-prefixed as Felix's
    table holds it; None for an endpoint with no interface name (expected IPs only: its
    interface is the kernel's to say)."""
    if not iface:
        return None
    suffix = ALL_INTERFACES if iface == "*" else iface
    if layer == "forward":
        prefix = HOST_FROM_FWD_PREFIX if inbound else HOST_TO_FWD_PREFIX
    else:
        prefix = HOST_FROM_PREFIX if inbound else HOST_TO_PREFIX
    return f"{NFT_LAYER[layer]}-{prefix}{suffix}"
