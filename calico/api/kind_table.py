"""The kind table: every kind's lower-case plural, scope and defining module, in one place.

Everything that needs a kind fact reads it here: the v3 models (``Resource.PLURAL`` and
``NAMESPACED`` are filled in from this table when a class is defined), the model's
``ResourceKey`` paths, the datastore client's keys and the CRD generator. Kinds with no
``module`` are not projectcalico.org/v3 resources but travel through the Felix syncer as
ResourceKeys (upstream's Kubernetes-only kinds), so they need a path too.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import NamedTuple


class KindInfo(NamedTuple):
    kind: str
    plural: str
    namespaced: bool
    module: str | None  # the calico.api module defining the model; None: not a v3 kind


_POLICY = "calico.api.policy"
_ENDPOINTS = "calico.api.endpoints"
_IPAM = "calico.api.ipam"
_BGP = "calico.api.bgp"
_CLUSTER = "calico.api.cluster"

_KINDS: tuple[KindInfo, ...] = (
    KindInfo("BGPConfiguration", "bgpconfigurations", False, _BGP),
    KindInfo("BGPFilter", "bgpfilters", False, _BGP),
    KindInfo("BGPPeer", "bgppeers", False, _BGP),
    KindInfo("BlockAffinity", "blockaffinities", False, _IPAM),
    KindInfo("CalicoNodeStatus", "caliconodestatuses", False, _CLUSTER),
    KindInfo("ClusterInformation", "clusterinformations", False, _CLUSTER),
    KindInfo("DatastoreMigration", "datastoremigrations", False, _CLUSTER),
    KindInfo("FelixConfiguration", "felixconfigurations", False, "calico.api.felixconfig"),
    KindInfo("GlobalNetworkPolicy", "globalnetworkpolicies", False, _POLICY),
    KindInfo("GlobalNetworkSet", "globalnetworksets", False, _ENDPOINTS),
    KindInfo("HostEndpoint", "hostendpoints", False, _ENDPOINTS),
    KindInfo("IPAMBlock", "ipamblocks", False, _IPAM),
    KindInfo("IPAMConfiguration", "ipamconfigurations", False, _IPAM),
    KindInfo("IPAMHandle", "ipamhandles", False, _IPAM),
    KindInfo("IPPool", "ippools", False, _IPAM),
    KindInfo("IPReservation", "ipreservations", False, _IPAM),
    KindInfo("KubeControllersConfiguration", "kubecontrollersconfigurations", False, _CLUSTER),
    KindInfo("NetworkPolicy", "networkpolicies", True, _POLICY),
    KindInfo("NetworkSet", "networksets", True, _ENDPOINTS),
    KindInfo("Node", "nodes", False, _CLUSTER),
    KindInfo("Profile", "profiles", False, _ENDPOINTS),
    KindInfo("QoSPolicy", "qospolicies", False, _POLICY),
    KindInfo("StagedGlobalNetworkPolicy", "stagedglobalnetworkpolicies", False, _POLICY),
    KindInfo("StagedKubernetesNetworkPolicy", "stagedkubernetesnetworkpolicies", True, _POLICY),
    KindInfo("StagedNetworkPolicy", "stagednetworkpolicies", True, _POLICY),
    KindInfo("Tier", "tiers", False, _POLICY),
    KindInfo("WorkloadEndpoint", "workloadendpoints", True, _ENDPOINTS),
    # Not v3 resources: passed through by the Felix syncer as ResourceKeys.
    KindInfo("KubernetesEndpointSlice", "kubernetesendpointslices", True, None),
    KindInfo("KubernetesClusterNetworkPolicy", "kubernetesclusternetworkpolicies", False, None),
    KindInfo("KubernetesNetworkPolicy", "kubernetesnetworkpolicies", True, None),
    KindInfo("KubernetesService", "kubernetesservices", True, None),
    KindInfo("LiveMigration", "livemigrations", True, None),
)

#: Kind name -> info.
KINDS: MappingProxyType[str, KindInfo] = MappingProxyType({i.kind: i for i in _KINDS})
#: Plural -> info.
KINDS_BY_PLURAL: MappingProxyType[str, KindInfo] = MappingProxyType({i.plural: i for i in _KINDS})
#: v3 kind -> the module that defines its model.
KIND_MODULES: MappingProxyType[str, str] = MappingProxyType(
    {i.kind: i.module for i in _KINDS if i.module is not None}
)
_KINDS_BY_LOWER: dict[str, KindInfo] = {i.kind.lower(): i for i in _KINDS}


def kind_info(kind: str) -> KindInfo | None:
    """Look a kind up by name, case-insensitively (``networkpolicy`` finds NetworkPolicy)."""
    return KINDS.get(kind) or _KINDS_BY_LOWER.get(kind.lower())
