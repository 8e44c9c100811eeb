"""The four syncer types Typha serves (felix, bgp, tunnel-ip-allocation, node-status): which
v3 kinds each watches and through which update processor.

The lists follow upstream's syncersv1 packages. On the Kubernetes datastore Felix's list also
has KubernetesNetworkPolicy, KubernetesClusterNetworkPolicy and the raw Services and
EndpointSlices (the service index's input; upstream: only in KDD). With host-local IPAM
(``USE_POD_CIDR`` / ``usePodCIDR``) Felix's list has no IPAMBlock watch: its Node processor
turns each node's pod CIDRs into the blocks its route resolution needs, as upstream.
"""

from __future__ import annotations

from calico.datastore import Backend
from calico.model import processors as p
from calico.syncer.api import SyncerCallbacks
from calico.syncer.watchersyncer import ResourceType, WatcherSyncer

FELIX = "felix"
BGP = "bgp"
TUNNEL_IP_ALLOCATION = "tunnel-ip-allocation"
NODE_STATUS = "node-status"
SYNCER_TYPES = (FELIX, BGP, TUNNEL_IP_ALLOCATION, NODE_STATUS)


_rt = ResourceType


def felix_resource_types(
    kubernetes: bool = False, use_pod_cidr: bool = False
) -> list[ResourceType]:
    """Everything Felix's calculation graph consumes (Typha always runs as "leader");
    ``kubernetes``: the datastore is Kubernetes, whose native NetworkPolicies count too;
    ``use_pod_cidr``: host-local IPAM, blocks come from the Nodes' pod CIDRs. Processors
    are named, not resolved: each is imported when its kind's first resource arrives."""
    node = ("node_pod_cidr", "lean_node_pod_cidr") if use_pod_cidr else ("node", "lean_node")
    types = [
        _rt("ClusterInformation", "cluster_information", "lean_cluster_information"),
        _rt("FelixConfiguration", "felix_configuration", "lean_felix_configuration"),
        _rt("GlobalNetworkPolicy", "global_network_policy"),
        _rt("StagedGlobalNetworkPolicy", "staged_global_network_policy"),
        _rt("GlobalNetworkSet", "global_network_set"),
        _rt("IPPool", "ip_pool", "lean_ip_pool"),
        _rt("Node", *node),
        _rt("Profile", "profile", "lean_profile"),
        _rt("WorkloadEndpoint", "workload_endpoint", "workload_endpoint_lean"),
        _rt("NetworkPolicy", "network_policy", "lean_network_policy"),
        _rt("StagedNetworkPolicy", "staged_network_policy"),
        _rt("StagedKubernetesNetworkPolicy", "staged_kubernetes_network_policy"),
        _rt("NetworkSet", "network_set"),
        _rt("Tier", "tier", "lean_tier"),
        _rt("HostEndpoint", "host_endpoint"),
        _rt("BGPConfiguration"),
        _rt("BGPPeer"),
        _rt("LiveMigration"),
    ]
    if not use_pod_cidr:
        types.append(_rt("IPAMBlock", "ipam_block"))
    if kubernetes:
        types[:0] = [
            _rt("KubernetesNetworkPolicy", "kubernetes_network_policy"),
            _rt("KubernetesClusterNetworkPolicy", "kubernetes_cluster_network_policy"),
            _rt("KubernetesService", "kubernetes_raw"),
            _rt("KubernetesEndpointSlice", "kubernetes_raw"),
        ]
    return types


def bgp_resource_types(node: str | None = None) -> list[ResourceType]:
    """confd's view: pools, BGP config/peers/filters, all Nodes, and block affinities
    (only ``node``'s when given; Typha serves every host's)."""
    affinity = p.block_affinity if node is None else p.for_node(node, p.block_affinity)
    return [
        _rt("IPPool", "ip_pool"),
        _rt("BGPConfiguration"),
        _rt("Node"),
        _rt("BGPPeer"),
        _rt("BGPFilter"),
        _rt("BlockAffinity", affinity),
    ]


def tunnel_ip_allocation_resource_types(node: str | None = None) -> list[ResourceType]:
    """The tunnel-address allocator: pools and Nodes (only ``node`` when given)."""
    return [
        _rt("IPPool", "ip_pool"),
        _rt("Node", p.resource_passthrough if node is None else p.for_node(node)),
    ]


def node_status_resource_types() -> list[ResourceType]:
    return [_rt("CalicoNodeStatus")]


def _is_kubernetes(backend: Backend) -> bool:
    return getattr(backend, "datastore_type", "") == "kubernetes"


def uses_pod_cidr(backend: Backend) -> bool:
    """The backend's config asks for host-local IPAM (``USE_POD_CIDR``; upstream reads it
    from the datastore config whatever the datastore type)."""
    config = getattr(backend, "config", None)
    extra = getattr(config, "extra", None) or {}
    return extra.get("usePodCIDR") is True


def felix_syncer(backend: Backend, callbacks: SyncerCallbacks) -> WatcherSyncer:
    kinds = felix_resource_types(_is_kubernetes(backend), uses_pod_cidr(backend))
    return WatcherSyncer(backend, kinds, callbacks)


def bgp_syncer(
    backend: Backend, callbacks: SyncerCallbacks, node: str | None = None
) -> WatcherSyncer:
    return WatcherSyncer(backend, bgp_resource_types(node), callbacks)


def tunnel_ip_allocation_syncer(
    backend: Backend, callbacks: SyncerCallbacks, node: str | None = None
) -> WatcherSyncer:
    return WatcherSyncer(backend, tunnel_ip_allocation_resource_types(node), callbacks)


def node_status_syncer(backend: Backend, callbacks: SyncerCallbacks) -> WatcherSyncer:
    return WatcherSyncer(backend, node_status_resource_types(), callbacks)


def resource_types_for(syncer_type: str, node: str | None = None) -> list[ResourceType]:
    """The resource list of a syncer type by its wire name (what Typha's server needs)."""
    if syncer_type == FELIX:
        return felix_resource_types()
    if syncer_type == BGP:
        return bgp_resource_types(node)
    if syncer_type == TUNNEL_IP_ALLOCATION:
        return tunnel_ip_allocation_resource_types(node)
    if syncer_type == NODE_STATUS:
        return node_status_resource_types()
    raise ValueError(f"unknown syncer type {syncer_type!r}")


def new_syncer(
    syncer_type: str, backend: Backend, callbacks: SyncerCallbacks, node: str | None = None
) -> WatcherSyncer:
    if syncer_type == FELIX:
        return felix_syncer(backend, callbacks)
    return WatcherSyncer(backend, resource_types_for(syncer_type, node), callbacks)
