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
    #: calicoctl's other names for the kind besides its lower-case name (``Resource.ALIASES``)
    aliases: tuple[str, ...] = ()


_POLICY = "calico.api.policy"
_STAGED = "calico.api.stagedpolicy"
_QOS = "calico.api.qos"
_ENDPOINTS = "calico.api.endpoints"
_IPAM = "calico.api.ipam"
_BGP = "calico.api.bgp"
_CLUSTER = "calico.api.cluster"
_IPAM_ALLOC = "calico.api.ipamalloc"

_KINDS: tuple[KindInfo, ...] = (
    KindInfo(
        "BGPConfiguration",
        "bgpconfigurations",
        False,
        _BGP,
        ("bgpconfigurations", "bgpconfig", "bgpconfigs"),
    ),
    KindInfo("BGPFilter", "bgpfilters", False, _BGP, ("bgpfilters", "bgpf", "bgpfs", "bf", "bfs")),
    KindInfo("BGPPeer", "bgppeers", False, _BGP, ("bgppeers", "bgpp", "bgpps", "bp", "bps")),
    KindInfo(
        "BlockAffinity",
        "blockaffinities",
        False,
        _IPAM_ALLOC,
        ("blockaffinities", "affinity", "affinities"),
    ),
    KindInfo(
        "CalicoNodeStatus",
        "caliconodestatuses",
        False,
        "calico.api.nodestatus",
        ("caliconodestatuses", "nodestatus", "nodestatuses"),
    ),
    KindInfo(
        "ClusterInformation",
        "clusterinformations",
        False,
        _CLUSTER,
        ("clusterinformations", "clusterinfo", "clusterinfos"),
    ),
    KindInfo(
        "DatastoreMigration",
        "datastoremigrations",
        False,
        "calico.api.migration",
        ("datastoremigrations",),
    ),
    KindInfo(
        "FelixConfiguration",
        "felixconfigurations",
        False,
        "calico.api.felixconfig",
        ("felixconfigurations", "felixconfig", "felixconfigs"),
    ),
    KindInfo(
        "GlobalNetworkPolicy",
        "globalnetworkpolicies",
        False,
        _POLICY,
        ("globalnetworkpolicies", "gnp", "gnps"),
    ),
    KindInfo("GlobalNetworkSet", "globalnetworksets", False, _ENDPOINTS, ("globalnetworksets",)),
    KindInfo("HostEndpoint", "hostendpoints", False, _ENDPOINTS, ("hostendpoints", "hep", "heps")),
    KindInfo("IPAMBlock", "ipamblocks", False, _IPAM, ("ipamblocks",)),
    KindInfo(
        "IPAMConfiguration",
        "ipamconfigurations",
        False,
        _IPAM_ALLOC,
        ("ipamconfigurations", "ipamconfig", "ipamconfigs"),
    ),
    KindInfo("IPAMHandle", "ipamhandles", False, _IPAM_ALLOC, ("ipamhandles",)),
    KindInfo("IPPool", "ippools", False, _IPAM, ("ippools", "ipp", "ipps", "pool", "pools")),
    KindInfo(
        "IPReservation",
        "ipreservations",
        False,
        _IPAM_ALLOC,
        ("ipreservations", "reservation", "reservations"),
    ),
    KindInfo(
        "KubeControllersConfiguration",
        "kubecontrollersconfigurations",
        False,
        "calico.api.kubecontrollers",
        ("kubecontrollersconfigurations", "kubecontrollersconfig", "kubecontrollersconfigs"),
    ),
    KindInfo(
        "NetworkPolicy",
        "networkpolicies",
        True,
        _POLICY,
        ("networkpolicies", "policy", "np", "policies", "pol", "pols"),
    ),
    KindInfo("NetworkSet", "networksets", True, _ENDPOINTS, ("networksets", "netset", "netsets")),
    KindInfo("Node", "nodes", False, _CLUSTER, ("nodes", "no", "nos")),
    KindInfo("Profile", "profiles", False, _ENDPOINTS, ("profiles", "pro", "pros")),
    KindInfo("QoSPolicy", "qospolicies", False, _QOS, ("qospolicies",)),
    KindInfo(
        "StagedGlobalNetworkPolicy",
        "stagedglobalnetworkpolicies",
        False,
        _STAGED,
        ("stagedglobalnetworkpolicies", "sgnp"),
    ),
    KindInfo(
        "StagedKubernetesNetworkPolicy",
        "stagedkubernetesnetworkpolicies",
        True,
        _STAGED,
        ("stagedkubernetesnetworkpolicies", "sknp"),
    ),
    KindInfo(
        "StagedNetworkPolicy",
        "stagednetworkpolicies",
        True,
        _STAGED,
        ("stagednetworkpolicies", "snp"),
    ),
    KindInfo("Tier", "tiers", False, _POLICY, ("tiers",)),
    KindInfo(
        "WorkloadEndpoint",
        "workloadendpoints",
        True,
        _ENDPOINTS,
        ("workloadendpoints", "wep", "weps"),
    ),
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


_V3_BY_NAME: dict[str, KindInfo] = {}
for _info in _KINDS:
    for _name in (_info.kind.lower(), *_info.aliases) if _info.module else ():
        if _V3_BY_NAME.setdefault(_name, _info) is not _info:
            raise ValueError(
                f"kind name {_name!r} used by {_V3_BY_NAME[_name].kind} and {_info.kind}"
            )


def v3_kind_named(name: str) -> KindInfo | None:
    """The v3 kind calicoctl means by ``name``: its Kind or an alias, case-insensitively.

    Answered from this table, so resolving ``wep`` imports no model module.
    """
    return _V3_BY_NAME.get(name.lower())


def kind_info(kind: str) -> KindInfo | None:
    """Look a kind up by name, case-insensitively (``networkpolicy`` finds NetworkPolicy)."""
    return KINDS.get(kind) or _KINDS_BY_LOWER.get(kind.lower())
