"""Cluster-level resources Felix reads: ClusterInformation and Node.

ClusterInformation is a singleton named ``default``; Node is written by node startup (addresses,
tunnel IPs, BGP identity). The other cluster kinds live in their own modules, so a Felix start
does not define them: KubeControllersConfiguration (``calico.api.kubecontrollers``),
DatastoreMigration (``calico.api.migration``) and CalicoNodeStatus (``calico.api.nodestatus``);
their names still resolve here (PEP 562), as they were defined here before.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field

from calico.api import validators as v
from calico.api.base import CalicoModel, Resource, SingletonResource, register
from calico.api.fieldtypes import ASNumber
from calico.api.reexport import moved_attributes

IPv4 = Annotated[str, AfterValidator(lambda s: v.ip_address(s, 4))]
IPv6 = Annotated[str, AfterValidator(lambda s: v.ip_address(s, 6))]
MAC = Annotated[str, AfterValidator(v.mac_address)]

# --- ClusterInformation -----------------------------------------------------------------------


class ClusterInformationSpec(CalicoModel):
    """Written by node startup / kube-controllers; read by calicoctl version and Felix."""

    cluster_guid: str | None = Field(default=None, alias="clusterGUID")
    cluster_type: str | None = None
    calico_version: str | None = None
    datastore_ready: bool | None = None
    variant: str | None = None


@register
class ClusterInformation(SingletonResource):
    KIND: ClassVar[str] = "ClusterInformation"

    kind: str = "ClusterInformation"
    spec: ClusterInformationSpec = Field(default_factory=ClusterInformationSpec)


# --- Node -------------------------------------------------------------------------------------


class NodeBGPSpec(CalicoModel):
    """The node's BGP identity: addresses with prefix (``10.0.0.1/24``), AS, RR cluster."""

    as_number: ASNumber | None = None
    ipv4_address: Annotated[str, AfterValidator(lambda s: v.cidr(s, 4))] | None = Field(
        default=None, alias="ipv4Address"
    )
    ipv6_address: Annotated[str, AfterValidator(lambda s: v.cidr(s, 6))] | None = Field(
        default=None, alias="ipv6Address"
    )
    ipv4_ipip_tunnel_addr: IPv4 | None = Field(default=None, alias="ipv4IPIPTunnelAddr")
    route_reflector_cluster_id: IPv4 | None = Field(default=None, alias="routeReflectorClusterID")


class OrchRef(CalicoModel):
    node_name: str | None = None
    orchestrator: str


class NodeWireguardSpec(CalicoModel):
    interface_ipv4_address: IPv4 | None = Field(default=None, alias="interfaceIPv4Address")
    interface_ipv6_address: IPv6 | None = Field(default=None, alias="interfaceIPv6Address")


class NodeAddress(CalicoModel):
    address: Annotated[str, AfterValidator(v.cidr)]
    type: Literal["CalicoNodeIP", "InternalIP", "ExternalIP"] | None = None


class NodeInterface(CalicoModel):
    name: str | None = None
    addresses: list[str] | None = None


class NodeSpec(CalicoModel):
    bgp: NodeBGPSpec | None = None
    ipv4_vxlan_tunnel_addr: IPv4 | None = Field(default=None, alias="ipv4VXLANTunnelAddr")
    vxlan_tunnel_mac_addr: MAC | None = Field(default=None, alias="vxlanTunnelMACAddr")
    ipv6_vxlan_tunnel_addr: IPv6 | None = Field(default=None, alias="ipv6VXLANTunnelAddr")
    vxlan_tunnel_mac_addr_v6: MAC | None = Field(default=None, alias="vxlanTunnelMACAddrV6")
    orch_refs: list[OrchRef] | None = None
    wireguard: NodeWireguardSpec | None = None
    addresses: list[NodeAddress] | None = None
    interfaces: list[NodeInterface] | None = None


class NodeStatus(CalicoModel):
    wireguard_public_key: str | None = None
    wireguard_public_key_v6: str | None = Field(default=None, alias="wireguardPublicKeyV6")
    pod_cidrs: list[str] | None = Field(default=None, alias="podCIDRs")


@register
class Node(Resource):
    KIND: ClassVar[str] = "Node"

    kind: str = "Node"
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus | None = None


# Defined in their own modules, imported on first use (kinds Felix never reads).
_MOVED = {
    **dict.fromkeys(
        (
            "EnabledDisabled",
            "AutoHostEndpointTemplate",
            "AutoHostEndpointConfig",
            "NodeControllerConfig",
            "ReconcilerConfig",
            "LoadBalancerControllerConfig",
            "PolicyMigratorConfig",
            "ControllersConfig",
            "KubeControllersConfigurationSpec",
            "KubeControllersConfigurationStatus",
            "KubeControllersConfiguration",
        ),
        "calico.api.kubecontrollers",
    ),
    **dict.fromkeys(
        (
            "DatastoreMigrationSpec",
            "DatastoreMigrationProgress",
            "DatastoreMigrationStatus",
            "DatastoreMigration",
        ),
        "calico.api.migration",
    ),
    **dict.fromkeys(
        (
            "BGPDaemonStatus",
            "CalicoNodeAgentStatus",
            "CalicoNodePeer",
            "CalicoNodeBGPStatus",
            "CalicoNodeRouteLearnedFrom",
            "CalicoNodeRoute",
            "CalicoNodeBGPRouteStatus",
            "CalicoNodeStatusSpec",
            "CalicoNodeStatusStatus",
            "CalicoNodeStatus",
        ),
        "calico.api.nodestatus",
    ),
}


__getattr__ = moved_attributes(globals(), _MOVED)
