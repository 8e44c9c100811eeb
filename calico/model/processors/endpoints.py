"""Endpoint-side kinds -> the v1 values Felix's label index and endpoint managers consume:
WorkloadEndpoint, HostEndpoint, Profile, NetworkSet and GlobalNetworkSet.

Namespace membership becomes a label (``projectcalico.org/namespace``), always set from where
the resource lives, so a workload or network set cannot claim another namespace by labelling
itself; user ``pcns.``/``pcsa.`` labels on workloads are dropped for the same reason.
"""

from __future__ import annotations

from typing import Any

from calico.api.endpoints import (
    GlobalNetworkSet,
    HostEndpoint,
    NetworkSet,
    Profile,
    WorkloadEndpoint,
)
from calico.model.keys import HostEndpointKey, NetworkSetKey, ProfileLabelsKey, ProfileRulesKey
from calico.model.names import wep_key_from_v3
from calico.model.processors.common import (
    NAMESPACE_LABEL,
    NAMESPACE_LABEL_PREFIX,
    NAMESPACE_PROFILE_PREFIX,
    ORCHESTRATOR_LABEL,
    SERVICE_ACCOUNT_LABEL,
    SERVICE_ACCOUNT_LABEL_PREFIX,
    Output,
    decode,
    endpoint_ports,
    ip_str,
    mac_str,
    net_str,
    passthrough,
    split_by_version,
)
from calico.model.processors.rules import rules_v1


def _wep_labels(res: WorkloadEndpoint, namespace: str) -> dict[str, str]:
    labels = {
        k: v
        for k, v in (res.metadata.labels or {}).items()
        if not k.startswith((NAMESPACE_LABEL_PREFIX, SERVICE_ACCOUNT_LABEL_PREFIX))
    }
    # Upstream's client stamps these two on the stored WEP; ours does not, so add them here.
    labels[NAMESPACE_LABEL] = namespace
    if res.spec.orchestrator:
        labels[ORCHESTRATOR_LABEL] = res.spec.orchestrator
    if res.spec.service_account_name:
        labels[SERVICE_ACCOUNT_LABEL] = res.spec.service_account_name
    return labels


def workload_endpoint(path: str, value: Any) -> Output:
    """model.WorkloadEndpoint JSON. A WEP without IPs is not sent: Felix could not render
    rules for it yet (the CNI plugin fills the IPs in a moment later)."""
    key, res = decode(path, value, WorkloadEndpoint)
    spec = res.spec
    if not spec.ip_networks:
        return {}
    v4_nets, v6_nets = split_by_version(spec.ip_networks, net_str)
    out: dict[str, Any] = {
        "state": "active",
        "name": spec.interface_name or "",
        "active_instance_id": "",
        "mac": mac_str(spec.mac) if spec.mac else None,
        "profile_ids": list(spec.profiles) if spec.profiles else None,
        "ipv4_nets": v4_nets or None,
        "ipv6_nets": v6_nets or None,
    }
    nats: dict[str, list[dict[str, str]]] = {"ipv4_nat": [], "ipv6_nat": []}
    for nat in spec.ip_nats or []:
        entry = {"int_ip": ip_str(nat.internal_ip), "ext_ip": ip_str(nat.external_ip)}
        nats["ipv6_nat" if ":" in entry["int_ip"] else "ipv4_nat"].append(entry)
    out.update({k: v for k, v in nats.items() if v})
    out["labels"] = _wep_labels(res, key.namespace)
    if spec.ipv4_gateway:
        out["ipv4_gateway"] = ip_str(spec.ipv4_gateway)
    if spec.ipv6_gateway:
        out["ipv6_gateway"] = ip_str(spec.ipv6_gateway)
    if ports := endpoint_ports(spec.ports, named_only=True):
        out["ports"] = ports
    if res.metadata.generate_name:
        out["generate_name"] = res.metadata.generate_name
    if spec.allow_spoofed_source_prefixes:
        out["allow_spoofed_source_ips"] = [net_str(p) for p in spec.allow_spoofed_source_prefixes]
    if res.metadata.annotations:
        out["annotations"] = dict(res.metadata.annotations)
    return {wep_key_from_v3(key.namespace, key.name).default_path(): out}


def host_endpoint(path: str, value: Any) -> Output:
    """model.HostEndpoint JSON, filed under the node the endpoint belongs to."""
    key, res = decode(path, value, HostEndpoint)
    spec = res.spec
    v4, v6 = split_by_version(spec.expected_ips or [], ip_str)
    out: dict[str, Any] = {}
    if spec.interface_name:
        out["name"] = spec.interface_name
    if v4:
        out["expected_ipv4_addrs"] = v4
    if v6:
        out["expected_ipv6_addrs"] = v6
    out["labels"] = dict(res.metadata.labels) if res.metadata.labels else None
    if spec.profiles:
        out["profile_ids"] = list(spec.profiles)
    if ports := endpoint_ports(spec.ports, named_only=False):
        out["ports"] = ports
    return {HostEndpointKey(spec.node or "", key.name).default_path(): out}


def profile(path: str, value: Any) -> Output:
    """Rules and labels as the v1 profile keys, plus the v3 Profile itself (Felix's
    ProfileDecoder reads namespace/service-account labels from it)."""
    key, res = decode(path, value, Profile)
    out: Output = {
        ProfileRulesKey(key.name).default_path(): {
            "inbound_rules": rules_v1(res.spec.ingress),
            "outbound_rules": rules_v1(res.spec.egress),
        }
    }
    if res.spec.labels_to_apply:
        out[ProfileLabelsKey(key.name).default_path()] = dict(res.spec.labels_to_apply)
    out.update(passthrough(path, value))
    return out


def network_set(path: str, value: Any) -> Output:
    """Namespaced sets are named ``<ns>/<name>``, carry the namespace label and inherit the
    namespace's labels through its ``kns.<ns>`` profile."""
    key, res = decode(path, value, NetworkSet)
    labels = dict(res.metadata.labels or {})
    labels[NAMESPACE_LABEL] = key.namespace
    out = {
        "nets": [net_str(n) for n in res.spec.nets or []] or None,
        "labels": labels,
        "profile_ids": [NAMESPACE_PROFILE_PREFIX + key.namespace],
    }
    return {NetworkSetKey(f"{key.namespace}/{key.name}").default_path(): out}


def global_network_set(path: str, value: Any) -> Output:
    key, res = decode(path, value, GlobalNetworkSet)
    out = {
        "nets": [net_str(n) for n in res.spec.nets or []] or None,
        "labels": dict(res.metadata.labels) if res.metadata.labels else None,
    }
    return {NetworkSetKey(key.name).default_path(): out}
