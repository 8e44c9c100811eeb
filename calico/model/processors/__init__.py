"""Update processors: v3 resources as stored -> the typed v1 model keys/values consumers use.

A processor is ``(ResourceKey, decoded JSON) -> {v1 Key: typed value}``; it never sees deletes
(the syncer diffs what each source key produced) and raises ``ValueError`` for a resource it
cannot convert. ``PROCESSORS`` maps each v3 kind to its processor; kinds without an entry are
passed through as the validated v3 resource (``resource_passthrough``). See design/model.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from calico.model.base import Key
from calico.model.processors.passthrough import (
    Processor,
    for_node,
    kubernetes_raw,
    resource_passthrough,
)
from calico.model.resources import ResourceKey

if TYPE_CHECKING:
    from calico.model.processors.affinity import block_affinity
    from calico.model.processors.config import (
        cluster_information,
        felix_configuration,
        node,
        node_pod_cidr,
    )
    from calico.model.processors.endpoints import (
        global_network_set,
        host_endpoint,
        network_set,
        profile,
        workload_endpoint,
        workload_endpoint_lean,
    )
    from calico.model.processors.ipam import ip_pool, ipam_block
    from calico.model.processors.leanconfig import lean_cluster_information
    from calico.model.processors.leanfelixconfig import lean_felix_configuration
    from calico.model.processors.leannode import lean_node, lean_node_pod_cidr
    from calico.model.processors.leanpolicy import lean_network_policy, lean_tier
    from calico.model.processors.leanpool import lean_ip_pool
    from calico.model.processors.leanprofile import lean_profile
    from calico.model.processors.policy import (
        global_network_policy,
        kubernetes_cluster_network_policy,
        kubernetes_network_policy,
        network_policy,
        staged_global_network_policy,
        staged_kubernetes_network_policy,
        staged_network_policy,
        tier,
    )
    from calico.model.processors.rules import rule_v1, rules_v1
    from calico.model.processors.selectors import entity_selector, prefix_selector

_PKG = "calico.model.processors."
#: Where each processor (and helper) is defined. Modules are imported when a name is first
#: used: each one imports the API models of its kinds, and a process that converts three kinds
#: should not build (or import) the models of thirty (design/performance.md "Imports").
_HOMES: Mapping[str, str] = {
    **dict.fromkeys(
        ("cluster_information", "felix_configuration", "node", "node_pod_cidr"), "config"
    ),
    **dict.fromkeys(
        (
            "global_network_set",
            "host_endpoint",
            "network_set",
            "profile",
            "workload_endpoint",
            "workload_endpoint_lean",
        ),
        "endpoints",
    ),
    "block_affinity": "affinity",
    **dict.fromkeys(("lean_network_policy", "lean_tier"), "leanpolicy"),
    "lean_cluster_information": "leanconfig",
    "lean_felix_configuration": "leanfelixconfig",
    **dict.fromkeys(("lean_node", "lean_node_pod_cidr"), "leannode"),
    "lean_ip_pool": "leanpool",
    "lean_profile": "leanprofile",
    **dict.fromkeys(("ip_pool", "ipam_block"), "ipam"),
    **dict.fromkeys(
        (
            "global_network_policy",
            "kubernetes_cluster_network_policy",
            "kubernetes_network_policy",
            "network_policy",
            "staged_global_network_policy",
            "staged_kubernetes_network_policy",
            "staged_network_policy",
            "tier",
        ),
        "policy",
    ),
    **dict.fromkeys(("rule_v1", "rules_v1"), "rules"),
    **dict.fromkeys(("entity_selector", "prefix_selector"), "selectors"),
}

#: The Felix syncer's processor for each v3 kind (others pass through), by name.
_KIND_PROCESSORS: Mapping[str, str] = {
    "ClusterInformation": "cluster_information",
    "FelixConfiguration": "felix_configuration",
    "GlobalNetworkPolicy": "global_network_policy",
    "GlobalNetworkSet": "global_network_set",
    "HostEndpoint": "host_endpoint",
    "IPAMBlock": "ipam_block",
    "IPPool": "ip_pool",
    "NetworkPolicy": "network_policy",
    "NetworkSet": "network_set",
    "Node": "node",
    "Profile": "profile",
    "StagedGlobalNetworkPolicy": "staged_global_network_policy",
    "StagedKubernetesNetworkPolicy": "staged_kubernetes_network_policy",
    "StagedNetworkPolicy": "staged_network_policy",
    "Tier": "tier",
    "WorkloadEndpoint": "workload_endpoint",
    "BlockAffinity": "block_affinity",
}


def _resolve(name: str) -> Any:
    value = getattr(importlib.import_module(_PKG + _HOMES[name]), name)
    globals()[name] = value
    return value


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return _resolve(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Processors(Mapping[str, Processor]):
    """kind -> processor, importing a processor's module on first lookup."""

    def __getitem__(self, kind: str) -> Processor:
        name = _KIND_PROCESSORS[kind]
        found = globals().get(name)
        return found if found is not None else _resolve(name)  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        return iter(_KIND_PROCESSORS)

    def __len__(self) -> int:
        return len(_KIND_PROCESSORS)


#: The Felix syncer's processor for each v3 kind (others pass through).
PROCESSORS: Mapping[str, Processor] = _Processors()


def process(key: ResourceKey, value: Any) -> Mapping[Key, Any]:
    """Convert any v3 resource with the processor for its kind."""
    kind = key.kind
    if kind in _KIND_PROCESSORS:
        return PROCESSORS[kind](key, value)
    return resource_passthrough(key, value)


__all__ = [
    "PROCESSORS",
    "Processor",
    "block_affinity",
    "cluster_information",
    "entity_selector",
    "felix_configuration",
    "for_node",
    "global_network_policy",
    "global_network_set",
    "host_endpoint",
    "ip_pool",
    "ipam_block",
    "kubernetes_cluster_network_policy",
    "kubernetes_network_policy",
    "kubernetes_raw",
    "lean_cluster_information",
    "lean_felix_configuration",
    "lean_ip_pool",
    "lean_network_policy",
    "lean_node",
    "lean_node_pod_cidr",
    "lean_profile",
    "lean_tier",
    "network_policy",
    "network_set",
    "node",
    "node_pod_cidr",
    "prefix_selector",
    "process",
    "profile",
    "resource_passthrough",
    "rule_v1",
    "rules_v1",
    "staged_global_network_policy",
    "staged_kubernetes_network_policy",
    "staged_network_policy",
    "tier",
    "workload_endpoint",
    "workload_endpoint_lean",
]
