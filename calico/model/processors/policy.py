"""Policy kinds and tiers -> ``PolicyKey`` / ``TierKey`` values (model.Policy, model.Tier).

Namespaced policies are confined to their namespace by rewriting the main selector
(``(<sel>) && projectcalico.org/namespace == '<ns>'``); global policies fold their
namespaceSelector / serviceAccountSelector in with the ``pcns.`` / ``pcsa.`` prefixes. Staged
policies convert exactly like their enforced kind plus ``staged_action``; a staged Delete is
not sent at all (Felix only needs staged policies for "what if" flow-log accounting).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from calico.api.policynames import DEFAULT_TIER
from calico.model import values as v1
from calico.model.keys import PolicyKey, TierKey
from calico.model.processors.common import (
    NAMESPACE_LABEL,
    NAMESPACE_LABEL_PREFIX,
    SERVICE_ACCOUNT_LABEL,
    SERVICE_ACCOUNT_LABEL_PREFIX,
    Output,
    decode,
)
from calico.model.processors.rules import rules_v1
from calico.model.processors.selectors import and_prefixed
from calico.model.resources import ResourceKey

if TYPE_CHECKING:
    from calico.api.policy import GlobalNetworkPolicySpec, NetworkPolicySpec


def _model(kind: str) -> Any:
    """The v3 model class of ``kind``, imported on first use: the lean reader
    (``leanpolicy``) builds values with this module's functions without pydantic."""
    from calico.api import policy

    return getattr(policy, kind)


def _policy_value(
    spec: NetworkPolicySpec | GlobalNetworkPolicySpec,
    namespace: str,
    selector: str,
    staged_action: str | None = None,
) -> v1.Policy:
    """model.Policy; Go's omitempty leaves unset/false/empty fields out of its JSON."""
    is_global = bool(getattr(spec, "GLOBAL", False))  # the global specs (and staged forms)
    return v1.Policy(
        namespace=namespace,
        tier=spec.tier or DEFAULT_TIER,
        order=float(spec.order) if spec.order is not None else None,
        inbound_rules=rules_v1(spec.ingress, namespace),
        outbound_rules=rules_v1(spec.egress, namespace),
        selector=selector,
        untracked=bool(is_global and spec.do_not_track),
        pre_dnat=bool(is_global and spec.pre_dnat),
        apply_on_forward=bool(is_global and spec.apply_on_forward),
        types=tuple(t.lower() for t in spec.types or ()),
        performance_hints=tuple(spec.performance_hints or ()),
        staged_action=staged_action,
    )


def namespaced_policy_value(
    spec: NetworkPolicySpec, namespace: str, staged_action: str | None = None
) -> v1.Policy:
    selector = spec.selector or ""
    ns_clause = f"{NAMESPACE_LABEL} == '{namespace}'"
    selector = f"({selector}) && {ns_clause}" if selector else ns_clause
    selector = and_prefixed(
        selector, spec.service_account_selector or "", SERVICE_ACCOUNT_LABEL_PREFIX
    )
    return _policy_value(spec, namespace, selector, staged_action)


def global_policy_value(
    spec: GlobalNetworkPolicySpec, staged_action: str | None = None
) -> v1.Policy:
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
    return _policy_value(spec, "", selector, staged_action)


def network_policy(key: ResourceKey, value: Any) -> Output:
    res = decode(key, value, _model("NetworkPolicy"))
    pkey = PolicyKey(key.kind, key.namespace, key.name)
    return {pkey: namespaced_policy_value(res.spec, key.namespace)}


def kubernetes_network_policy(key: ResourceKey, value: Any) -> Output:
    """A Kubernetes NetworkPolicy the Kubernetes datastore already converted to a Calico
    NetworkPolicy value; Felix's key keeps the KubernetesNetworkPolicy kind and raw name."""
    res = decode(
        ResourceKey("NetworkPolicy", key.name, key.namespace), value, _model("NetworkPolicy")
    )
    pkey = PolicyKey(key.kind, key.namespace, key.name)
    return {pkey: namespaced_policy_value(res.spec, key.namespace)}


def kubernetes_cluster_network_policy(key: ResourceKey, value: Any) -> Output:
    """A ClusterNetworkPolicy the Kubernetes datastore converted to a GlobalNetworkPolicy
    (kube-admin / kube-baseline tier); Felix's key keeps the source kind and raw name."""
    res = decode(ResourceKey("GlobalNetworkPolicy", key.name), value, _model("GlobalNetworkPolicy"))
    return {PolicyKey(key.kind, "", key.name): global_policy_value(res.spec)}


def global_network_policy(key: ResourceKey, value: Any) -> Output:
    res = decode(key, value, _model("GlobalNetworkPolicy"))
    return {PolicyKey(key.kind, "", key.name): global_policy_value(res.spec)}


# The staged kinds' models (calico.api.stagedpolicy) are imported when one is first converted:
# a reader of enforced policies only (calicoctl explain, most datastores) never defines them.


def staged_network_policy(key: ResourceKey, value: Any) -> Output:
    from calico.api.stagedpolicy import StagedNetworkPolicy

    res = decode(key, value, StagedNetworkPolicy)
    if res.spec.staged_action == "Delete":
        return {}
    policy = namespaced_policy_value(res.spec, key.namespace, res.spec.staged_action)
    return {PolicyKey(key.kind, key.namespace, key.name): policy}


def staged_global_network_policy(key: ResourceKey, value: Any) -> Output:
    from calico.api.stagedpolicy import StagedGlobalNetworkPolicy

    res = decode(key, value, StagedGlobalNetworkPolicy)
    if res.spec.staged_action == "Delete":
        return {}
    policy = global_policy_value(res.spec, res.spec.staged_action)
    return {PolicyKey(key.kind, "", key.name): policy}


def staged_kubernetes_network_policy(key: ResourceKey, value: Any) -> Output:
    from calico.api.stagedpolicy import StagedKubernetesNetworkPolicy
    from calico.model.processors.k8spolicy import k8s_policy_spec

    res = decode(key, value, StagedKubernetesNetworkPolicy)
    if res.spec.staged_action == "Delete":
        return {}
    spec = k8s_policy_spec(res.spec)
    policy = namespaced_policy_value(spec, key.namespace, res.spec.staged_action)
    return {PolicyKey(key.kind, key.namespace, key.name): policy}


def tier(key: ResourceKey, value: Any) -> Output:
    """model.Tier: ``order`` (omitted when unset = last) and ``defaultAction``; anything but
    Pass is Deny."""
    res = decode(key, value, _model("Tier"))
    order = float(res.spec.order) if res.spec.order is not None else None
    action = "Pass" if res.spec.default_action == "Pass" else "Deny"
    return {TierKey(key.name): v1.Tier(order=order, default_action=action)}
