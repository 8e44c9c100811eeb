"""Policy kinds and tiers -> ``PolicyKey`` / ``TierKey`` values (model.Policy, model.Tier JSON).

Namespaced policies are confined to their namespace by rewriting the main selector
(``(<sel>) && projectcalico.org/namespace == '<ns>'``); global policies fold their
namespaceSelector / serviceAccountSelector in with the ``pcns.`` / ``pcsa.`` prefixes. Staged
policies convert exactly like their enforced kind plus ``staged_action``; a staged Delete is
not sent at all (Felix only needs staged policies for "what if" flow-log accounting).
"""

from __future__ import annotations

from typing import Any

from calico.api.policy import (
    DEFAULT_TIER,
    GlobalNetworkPolicy,
    GlobalNetworkPolicySpec,
    NetworkPolicy,
    NetworkPolicySpec,
    StagedGlobalNetworkPolicy,
    StagedKubernetesNetworkPolicy,
    StagedNetworkPolicy,
    Tier,
)
from calico.model.keys import PolicyKey, TierKey
from calico.model.processors.common import (
    NAMESPACE_LABEL,
    NAMESPACE_LABEL_PREFIX,
    SERVICE_ACCOUNT_LABEL,
    SERVICE_ACCOUNT_LABEL_PREFIX,
    Output,
    decode,
)
from calico.model.processors.k8spolicy import k8s_policy_spec
from calico.model.processors.rules import rules_v1
from calico.model.processors.selectors import and_prefixed


def _policy_value(
    spec: NetworkPolicySpec | GlobalNetworkPolicySpec, namespace: str, selector: str
) -> dict[str, Any]:
    """model.Policy JSON with Go's omitempty: unset/false/empty fields are left out."""
    out: dict[str, Any] = {}
    if namespace:
        out["namespace"] = namespace
    out["tier"] = spec.tier or DEFAULT_TIER
    if spec.order is not None:
        out["order"] = spec.order
    if inbound := rules_v1(spec.ingress, namespace):
        out["inbound_rules"] = inbound
    if outbound := rules_v1(spec.egress, namespace):
        out["outbound_rules"] = outbound
    out["selector"] = selector
    if isinstance(spec, GlobalNetworkPolicySpec):
        if spec.do_not_track:
            out["untracked"] = True
        if spec.pre_dnat:
            out["pre_dnat"] = True
        if spec.apply_on_forward:
            out["apply_on_forward"] = True
    if spec.types:
        out["types"] = [t.lower() for t in spec.types]
    if spec.performance_hints:
        out["performance_hints"] = list(spec.performance_hints)
    return out


def namespaced_policy_value(spec: NetworkPolicySpec, namespace: str) -> dict[str, Any]:
    selector = spec.selector or ""
    ns_clause = f"{NAMESPACE_LABEL} == '{namespace}'"
    selector = f"({selector}) && {ns_clause}" if selector else ns_clause
    selector = and_prefixed(
        selector, spec.service_account_selector or "", SERVICE_ACCOUNT_LABEL_PREFIX
    )
    return _policy_value(spec, namespace, selector)


def global_policy_value(spec: GlobalNetworkPolicySpec) -> dict[str, Any]:
    # The all() substitutions are plain text replaces on the combined selector, so an all() in
    # the main selector is rewritten too - upstream's quirk, kept for identical selectors.
    selector = spec.selector or ""
    if spec.namespace_selector:
        selector = and_prefixed(selector, spec.namespace_selector, NAMESPACE_LABEL_PREFIX)
        selector = selector.replace("all()", f"has({NAMESPACE_LABEL})")
    if spec.service_account_selector:
        selector = and_prefixed(
            selector, spec.service_account_selector, SERVICE_ACCOUNT_LABEL_PREFIX
        )
        selector = selector.replace("all()", f"has({SERVICE_ACCOUNT_LABEL})")
    return _policy_value(spec, "", selector)


def network_policy(path: str, value: Any) -> Output:
    key, res = decode(path, value, NetworkPolicy)
    pkey = PolicyKey(key.kind, key.namespace, key.name)
    return {pkey.default_path(): namespaced_policy_value(res.spec, key.namespace)}


def global_network_policy(path: str, value: Any) -> Output:
    key, res = decode(path, value, GlobalNetworkPolicy)
    return {PolicyKey(key.kind, "", key.name).default_path(): global_policy_value(res.spec)}


def staged_network_policy(path: str, value: Any) -> Output:
    key, res = decode(path, value, StagedNetworkPolicy)
    if res.spec.staged_action == "Delete":
        return {}
    policy = namespaced_policy_value(res.spec, key.namespace)
    policy["staged_action"] = res.spec.staged_action
    return {PolicyKey(key.kind, key.namespace, key.name).default_path(): policy}


def staged_global_network_policy(path: str, value: Any) -> Output:
    key, res = decode(path, value, StagedGlobalNetworkPolicy)
    if res.spec.staged_action == "Delete":
        return {}
    policy = global_policy_value(res.spec)
    policy["staged_action"] = res.spec.staged_action
    return {PolicyKey(key.kind, "", key.name).default_path(): policy}


def staged_kubernetes_network_policy(path: str, value: Any) -> Output:
    key, res = decode(path, value, StagedKubernetesNetworkPolicy)
    if res.spec.staged_action == "Delete":
        return {}
    policy = namespaced_policy_value(k8s_policy_spec(res.spec), key.namespace)
    policy["staged_action"] = res.spec.staged_action
    return {PolicyKey(key.kind, key.namespace, key.name).default_path(): policy}


def tier(path: str, value: Any) -> Output:
    """model.Tier JSON: ``order`` (omitted when unset = last) and ``defaultAction``; anything
    but Pass is Deny."""
    key, res = decode(path, value, Tier)
    out: dict[str, Any] = {}
    if res.spec.order is not None:
        out["order"] = res.spec.order
    out["defaultAction"] = "Pass" if res.spec.default_action == "Pass" else "Deny"
    return {TierKey(key.name).default_path(): out}
