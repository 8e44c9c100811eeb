"""A Kubernetes NetworkPolicy spec (as StagedKubernetesNetworkPolicy carries it) expressed as a
Calico NetworkPolicy spec, so it goes through the same v1 conversion as every other policy.

The mapping follows upstream's k8s conversion: pod selectors gain
``projectcalico.org/orchestrator == 'k8s'`` (they can only select pods), every (port, peer)
pair becomes one Allow rule, a port without protocol is TCP, ``ipBlock.except`` becomes
``notNets``, and the policy order is 1000.
"""

from __future__ import annotations

from typing import Any

from calico.api.policy import NetworkPolicySpec
from calico.api.stagedpolicy import (
    LabelSelector,
    NetworkPolicyPeer,
    NetworkPolicyPort,
    StagedKubernetesNetworkPolicySpec,
)
from calico.model.processors.common import ORCHESTRATOR_LABEL

K8S_POLICY_ORDER = 1000.0
_POD_CLAUSE = f"{ORCHESTRATOR_LABEL} == 'k8s'"


def label_selector(sel: LabelSelector | None, *, pods: bool) -> str:
    """A Kubernetes label selector as Calico selector text (``all()`` for "every namespace")."""
    parts = [_POD_CLAUSE] if pods else []
    if sel is not None:
        for k, v in sorted((sel.match_labels or {}).items()):
            parts.append(f"{k} == '{v}'")
        for expr in sel.match_expressions or []:
            values = ", ".join(f"'{v}'" for v in expr.values or [])
            parts.append(
                {
                    "In": f"{expr.key} in {{ {values} }}",
                    "NotIn": f"{expr.key} not in {{ {values} }}",
                    "Exists": f"has({expr.key})",
                    "DoesNotExist": f"! has({expr.key})",
                }[expr.operator]
            )
    return " && ".join(parts) if parts else "all()"


def _peer(peer: NetworkPolicyPeer) -> dict[str, Any]:
    if peer.ip_block is not None:
        ent: dict[str, Any] = {"nets": [peer.ip_block.cidr]}
        if peer.ip_block.except_:
            ent["notNets"] = list(peer.ip_block.except_)
        return ent
    ent = {"selector": label_selector(peer.pod_selector, pods=True)}
    if peer.namespace_selector is not None:
        ent["namespaceSelector"] = label_selector(peer.namespace_selector, pods=False)
    return ent


def _port(port: NetworkPolicyPort) -> tuple[str, list[int | str]]:
    proto = port.protocol or "TCP"
    if port.port is None:
        return proto, []
    if port.end_port is not None and isinstance(port.port, int) and port.end_port > port.port:
        return proto, [f"{port.port}:{port.end_port}"]
    return proto, [port.port]


def _rules(
    ports: list[NetworkPolicyPort] | None, peers: list[NetworkPolicyPeer] | None, peer_side: str
) -> list[dict[str, Any]]:
    port_side = "destination"
    port_opts: list[tuple[str | None, list[int | str]]] = [_port(p) for p in ports or []]
    peer_opts: list[dict[str, Any]] = [_peer(p) for p in peers or []]
    rules = []
    for proto, nums in port_opts or [(None, [])]:
        for ent in peer_opts or [{}]:
            rule: dict[str, Any] = {"action": "Allow"}
            if proto is not None:
                rule["protocol"] = proto
            if ent:
                rule[peer_side] = dict(ent)
            if nums:
                rule.setdefault(port_side, {})["ports"] = nums
            rules.append(rule)
    return rules


def k8s_policy_spec(spec: StagedKubernetesNetworkPolicySpec) -> NetworkPolicySpec:
    ingress = [r for ir in spec.ingress or [] for r in _rules(ir.ports, ir.from_, "source")]
    egress = [r for er in spec.egress or [] for r in _rules(er.ports, er.to, "destination")]
    types = list(spec.policy_types or [])
    if not types:
        types = ["Ingress", "Egress"] if spec.egress else ["Ingress"]
    return NetworkPolicySpec.model_validate(
        {
            "order": K8S_POLICY_ORDER,
            "selector": label_selector(spec.pod_selector, pods=True),
            "ingress": ingress,
            "egress": egress,
            "types": types,
        }
    )
