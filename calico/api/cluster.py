"""Cluster-level resources: KubeControllersConfiguration, ClusterInformation, Node and
CalicoNodeStatus.

ClusterInformation and KubeControllersConfiguration are singletons named ``default``; Node is
written by node startup (addresses, tunnel IPs, BGP identity) and CalicoNodeStatus is a
request (``spec``) that calico-node answers in ``status``.
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from calico.api import validators as v
from calico.api.base import CalicoModel, Resource, SingletonResource, register
from calico.api.conditions import Condition, Time
from calico.api.fieldtypes import ASNumber, Duration, Selector

EnabledDisabled = Literal["Enabled", "Disabled"]
IPv4 = Annotated[str, AfterValidator(lambda s: v.ip_address(s, 4))]
IPv6 = Annotated[str, AfterValidator(lambda s: v.ip_address(s, 6))]
MAC = Annotated[str, AfterValidator(v.mac_address)]

# --- KubeControllersConfiguration -------------------------------------------------------------


def _regexp(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{value!r} is not a valid regular expression: {exc}") from None
    return value


class AutoHostEndpointTemplate(CalicoModel):
    """Which host endpoints the node controller creates automatically, and how to name them."""

    generate_name: (
        Annotated[str, Field(max_length=253), AfterValidator(v.dns1123_subdomain)] | None
    ) = None
    interface_cidrs: list[Annotated[str, AfterValidator(v.cidr)]] | None = Field(
        default=None, alias="interfaceCIDRs"
    )
    interface_pattern: Annotated[str, AfterValidator(_regexp)] | None = None
    labels: Annotated[dict[str, str], AfterValidator(v.label_map)] | None = None
    node_selector: Selector | None = None


class AutoHostEndpointConfig(CalicoModel):
    auto_create: EnabledDisabled | None = None
    create_default_host_endpoint: str | None = None
    templates: list[AutoHostEndpointTemplate] | None = None


class NodeControllerConfig(CalicoModel):
    reconciler_period: Duration | None = None
    sync_labels: EnabledDisabled | None = None
    host_endpoint: AutoHostEndpointConfig | None = None
    leak_grace_period: Duration | None = None


class ReconcilerConfig(CalicoModel):
    """Controllers whose only tunable is how often they resync."""

    reconciler_period: Duration | None = None


class LoadBalancerControllerConfig(CalicoModel):
    assign_ips: Literal["AllServices", "RequestedServicesOnly"] | None = Field(
        default=None, alias="assignIPs"
    )


class PolicyMigratorConfig(CalicoModel):
    enabled: EnabledDisabled | None = None


class ControllersConfig(CalicoModel):
    """A controller runs when its section is present."""

    node: NodeControllerConfig | None = None
    policy: ReconcilerConfig | None = None
    workload_endpoint: ReconcilerConfig | None = None
    service_account: ReconcilerConfig | None = None
    namespace: ReconcilerConfig | None = None
    load_balancer: LoadBalancerControllerConfig | None = None
    policy_migration: PolicyMigratorConfig | None = None


class KubeControllersConfigurationSpec(CalicoModel):
    log_severity_screen: (
        Literal["None", "Debug", "Info", "Warning", "Error", "Fatal", "Panic"] | None
    ) = None
    health_checks: EnabledDisabled | None = None
    etcd_v3_compaction_period: Duration | None = Field(default=None, alias="etcdV3CompactionPeriod")
    prometheus_metrics_port: Annotated[int, Field(ge=0, le=65535)] | None = None
    debug_profile_port: Annotated[int, Field(ge=0, le=65535)] | None = None
    controllers: ControllersConfig = Field(default_factory=ControllersConfig)


class KubeControllersConfigurationStatus(CalicoModel):
    """What kube-controllers is actually running with (spec merged with its env)."""

    running_config: KubeControllersConfigurationSpec | None = None
    environment_vars: dict[str, str] | None = None


@register
class KubeControllersConfiguration(SingletonResource):
    KIND: ClassVar[str] = "KubeControllersConfiguration"

    kind: str = "KubeControllersConfiguration"
    spec: KubeControllersConfigurationSpec = Field(default_factory=KubeControllersConfigurationSpec)
    status: KubeControllersConfigurationStatus | None = None


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


# --- DatastoreMigration -----------------------------------------------------------------------


class DatastoreMigrationSpec(CalicoModel):
    """Which migration to run; upstream knows one (crd.projectcalico.org/v1 CRDs to v3)."""

    type: Literal["V1ToV3"]


class DatastoreMigrationProgress(CalicoModel):
    total: Annotated[int, Field(ge=0)] | None = None
    migrated: Annotated[int, Field(ge=0)] | None = None
    skipped: Annotated[int, Field(ge=0)] | None = None
    conflicts: Annotated[int, Field(ge=0)] | None = None


class DatastoreMigrationStatus(CalicoModel):
    phase: Literal["Pending", "Migrating", "Converged", "Complete", "Failed"] | None = None
    started_at: Time | None = None
    completed_at: Time | None = None
    progress: DatastoreMigrationProgress | None = None
    conditions: list[Condition] | None = None


@register
class DatastoreMigration(Resource):
    """Triggers and tracks kube-controllers' v1-to-v3 CRD migration (a KDD-only workflow)."""

    KIND: ClassVar[str] = "DatastoreMigration"

    spec: DatastoreMigrationSpec
    status: DatastoreMigrationStatus | None = None


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


# --- CalicoNodeStatus -------------------------------------------------------------------------


class BGPDaemonStatus(CalicoModel):
    state: str | None = None
    version: str | None = None
    router_id: str | None = Field(default=None, alias="routerID")
    last_boot_time: str | None = None
    last_reconfiguration_time: str | None = None


class CalicoNodeAgentStatus(CalicoModel):
    bird_v4: BGPDaemonStatus | None = Field(default=None, alias="birdV4")
    bird_v6: BGPDaemonStatus | None = Field(default=None, alias="birdV6")


class CalicoNodePeer(CalicoModel):
    peer_ip: str | None = Field(default=None, alias="peerIP")
    type: str | None = None
    state: str | None = None
    since: str | None = None


class CalicoNodeBGPStatus(CalicoModel):
    number_established_v4: int = Field(default=0, alias="numberEstablishedV4")
    number_established_v6: int = Field(default=0, alias="numberEstablishedV6")
    number_not_established_v4: int = Field(default=0, alias="numberNotEstablishedV4")
    number_not_established_v6: int = Field(default=0, alias="numberNotEstablishedV6")
    peers_v4: list[CalicoNodePeer] | None = Field(default=None, alias="peersV4")
    peers_v6: list[CalicoNodePeer] | None = Field(default=None, alias="peersV6")


class CalicoNodeRouteLearnedFrom(CalicoModel):
    source_type: str | None = None
    peer_ip: str | None = Field(default=None, alias="peerIP")


class CalicoNodeRoute(CalicoModel):
    type: str | None = None
    destination: str | None = None
    gateway: str | None = None
    interface: str | None = None
    learned_from: CalicoNodeRouteLearnedFrom | None = None


class CalicoNodeBGPRouteStatus(CalicoModel):
    routes_v4: list[CalicoNodeRoute] | None = Field(default=None, alias="routesV4")
    routes_v6: list[CalicoNodeRoute] | None = Field(default=None, alias="routesV6")


class CalicoNodeStatusSpec(CalicoModel):
    """Which node to report on, which classes of information, and how often (0 = never)."""

    node: str | None = None
    classes: list[Literal["Agent", "BGP", "Routes"]] | None = None
    update_period_seconds: Annotated[int, Field(ge=0, le=2147483647)] | None = None

    @model_validator(mode="after")
    def _unique_classes(self) -> CalicoNodeStatusSpec:
        if self.classes and len(set(self.classes)) != len(self.classes):
            v.raise_at(("classes",), "classes must not contain duplicates")
        return self


class CalicoNodeStatusStatus(CalicoModel):
    last_updated: str | None = None
    agent: CalicoNodeAgentStatus | None = None
    bgp: CalicoNodeBGPStatus | None = None
    routes: CalicoNodeBGPRouteStatus | None = None


@register
class CalicoNodeStatus(Resource):
    KIND: ClassVar[str] = "CalicoNodeStatus"

    kind: str = "CalicoNodeStatus"
    spec: CalicoNodeStatusSpec = Field(default_factory=CalicoNodeStatusSpec)
    status: CalicoNodeStatusStatus | None = None
