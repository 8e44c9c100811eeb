"""v3 resource keys (``/calico/resources/v3/projectcalico.org/<plural>/[<ns>/]<name>``).

The kind table is the single place that knows each kind's lower-case plural and whether it is
namespaced; the path shape follows from the scope, so a global kind never has a namespace
segment and a namespaced kind always has one. Names and namespaces are written verbatim
(Kubernetes names cannot contain ``/`` or ``%``).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar, NamedTuple

from calico.model.base import Key, seg
from calico.model.escaping import InvalidKeyError

RESOURCE_PREFIX = "/calico/resources/v3/projectcalico.org/"


class KindInfo(NamedTuple):
    kind: str
    plural: str
    namespaced: bool


_KINDS: tuple[KindInfo, ...] = (
    # projectcalico.org/v3 kinds.
    KindInfo("BGPConfiguration", "bgpconfigurations", False),
    KindInfo("BGPFilter", "bgpfilters", False),
    KindInfo("BGPPeer", "bgppeers", False),
    KindInfo("BlockAffinity", "blockaffinities", False),
    KindInfo("CalicoNodeStatus", "caliconodestatuses", False),
    KindInfo("ClusterInformation", "clusterinformations", False),
    KindInfo("FelixConfiguration", "felixconfigurations", False),
    KindInfo("GlobalNetworkPolicy", "globalnetworkpolicies", False),
    KindInfo("GlobalNetworkSet", "globalnetworksets", False),
    KindInfo("HostEndpoint", "hostendpoints", False),
    KindInfo("IPAMBlock", "ipamblocks", False),
    KindInfo("IPAMConfiguration", "ipamconfigurations", False),
    KindInfo("IPAMHandle", "ipamhandles", False),
    KindInfo("IPPool", "ippools", False),
    KindInfo("IPReservation", "ipreservations", False),
    KindInfo("KubeControllersConfiguration", "kubecontrollersconfigurations", False),
    KindInfo("NetworkPolicy", "networkpolicies", True),
    KindInfo("NetworkSet", "networksets", True),
    KindInfo("Node", "nodes", False),
    KindInfo("Profile", "profiles", False),
    KindInfo("StagedGlobalNetworkPolicy", "stagedglobalnetworkpolicies", False),
    KindInfo("StagedKubernetesNetworkPolicy", "stagedkubernetesnetworkpolicies", True),
    KindInfo("StagedNetworkPolicy", "stagednetworkpolicies", True),
    KindInfo("Tier", "tiers", False),
    KindInfo("WorkloadEndpoint", "workloadendpoints", True),
    # Kinds the Felix syncer passes through as ResourceKeys although they are not Calico v3
    # resources; they need paths because the Typha cache is keyed by path.
    KindInfo("KubernetesEndpointSlice", "kubernetesendpointslices", True),
    KindInfo("KubernetesService", "kubernetesservices", True),
    KindInfo("LiveMigration", "livemigrations", True),
)

#: Kind name -> info.
KINDS: MappingProxyType[str, KindInfo] = MappingProxyType({i.kind: i for i in _KINDS})
#: Plural -> info.
KINDS_BY_PLURAL: MappingProxyType[str, KindInfo] = MappingProxyType({i.plural: i for i in _KINDS})
_KINDS_BY_LOWER: dict[str, KindInfo] = {i.kind.lower(): i for i in _KINDS}


def kind_info(kind: str) -> KindInfo | None:
    """Look a kind up by name, case-insensitively (``networkpolicy`` finds NetworkPolicy)."""
    return KINDS.get(kind) or _KINDS_BY_LOWER.get(kind.lower())


def resource_prefix(kind: str, namespace: str | None = None) -> str:
    """The list prefix for every resource of ``kind`` (optionally in one namespace)."""
    info = kind_info(kind)
    if info is None:
        raise InvalidKeyError(f"unknown resource kind {kind!r}")
    prefix = f"{RESOURCE_PREFIX}{info.plural}/"
    if namespace:
        if not info.namespaced:
            raise InvalidKeyError(f"{info.kind} is cluster-scoped; no namespace prefix")
        prefix += f"{namespace}/"
    return prefix


@dataclass(frozen=True, slots=True)
class ResourceKey(Key):
    """A whole v3 resource; ``namespace`` is ``""`` for cluster-scoped kinds."""

    LEADING_SLASH_REQUIRED: ClassVar[bool] = True

    kind: str
    name: str
    namespace: str = ""

    def __post_init__(self) -> None:
        # Canonical kind spelling, so ResourceKey("node", "a") == ResourceKey("Node", "a").
        if self.kind not in KINDS and (info := _KINDS_BY_LOWER.get(self.kind.lower())):
            object.__setattr__(self, "kind", info.kind)

    def default_path(self) -> str:
        info = kind_info(self.kind)
        if info is None:
            raise InvalidKeyError(f"ResourceKey: unknown kind {self.kind!r}")
        name = seg(self, "name", self.name)
        if info.namespaced:
            ns = seg(self, "namespace", self.namespace)
            return f"{RESOURCE_PREFIX}{info.plural}/{ns}/{name}"
        if self.namespace:
            raise InvalidKeyError(f"ResourceKey: {info.kind} is cluster-scoped but has a namespace")
        return f"{RESOURCE_PREFIX}{info.plural}/{name}"
