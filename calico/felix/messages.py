"""Messages from the calculation graph to the dataplane, named after upstream's felixbackend proto.

Plain frozen dataclasses: the calc graph emits them in a strictly ordered stream (see
design/felix-calc.md), the dataplane consumes them. Field names follow the proto fields
(snake_case). Collections are tuples so messages are hashable and immutable once sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class IPSetType(Enum):
    IP = "IP"  # hash:ip
    IP_AND_PORT = "IP_AND_PORT"  # hash:ip,port — members like "10.0.0.1,tcp:8080"
    NET = "NET"  # hash:net — members are CIDRs


# --- identifiers --------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class PolicyID:
    name: str
    kind: str = ""  # v3 kind (NetworkPolicy, GlobalNetworkPolicy, StagedNetworkPolicy, ...)
    namespace: str = ""
    tier: str = ""


@dataclass(frozen=True, order=True)
class ProfileID:
    name: str


@dataclass(frozen=True, order=True)
class WorkloadEndpointID:
    orchestrator_id: str
    workload_id: str
    endpoint_id: str


@dataclass(frozen=True, order=True)
class HostEndpointID:
    endpoint_id: str


@dataclass(frozen=True, order=True)
class ServiceAccountID:
    name: str
    namespace: str


@dataclass(frozen=True, order=True)
class NamespaceID:
    name: str


# --- rules ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PortRange:
    first: int
    last: int


@dataclass(frozen=True)
class ICMPTypeCode:
    type: int
    code: int | None = None


@dataclass(frozen=True)
class HTTPMatch:
    methods: tuple[str, ...] = ()
    paths: tuple[tuple[str, str], ...] = ()  # ("exact"|"prefix", path)


@dataclass(frozen=True)
class Rule:
    """A parsed rule: selectors and named ports already replaced by IP set IDs."""

    action: str  # allow | deny | log | next-tier (Pass) | pass
    ip_version: int | None = None  # 4, 6 or None (both)
    protocol: int | str | None = None  # number, or a name like "tcp"
    not_protocol: int | str | None = None
    src_net: tuple[str, ...] = ()
    src_ports: tuple[PortRange, ...] = ()
    src_ip_set_ids: tuple[str, ...] = ()
    src_named_port_ip_set_ids: tuple[str, ...] = ()
    src_ip_port_set_ids: tuple[str, ...] = ()  # svcnoport / service sets
    dst_net: tuple[str, ...] = ()
    dst_ports: tuple[PortRange, ...] = ()
    dst_ip_set_ids: tuple[str, ...] = ()
    dst_named_port_ip_set_ids: tuple[str, ...] = ()
    dst_ip_port_set_ids: tuple[str, ...] = ()  # svc: sets (IP+port members)
    icmp: ICMPTypeCode | None = None
    not_src_net: tuple[str, ...] = ()
    not_src_ports: tuple[PortRange, ...] = ()
    not_src_ip_set_ids: tuple[str, ...] = ()
    not_src_named_port_ip_set_ids: tuple[str, ...] = ()
    not_dst_net: tuple[str, ...] = ()
    not_dst_ports: tuple[PortRange, ...] = ()
    not_dst_ip_set_ids: tuple[str, ...] = ()
    not_dst_named_port_ip_set_ids: tuple[str, ...] = ()
    not_icmp: ICMPTypeCode | None = None
    http_match: HTTPMatch | None = None
    original_src_selector: str = ""
    original_dst_selector: str = ""
    original_not_src_selector: str = ""
    original_not_dst_selector: str = ""
    original_src_namespace_selector: str = ""
    original_dst_namespace_selector: str = ""
    metadata: tuple[tuple[str, str], ...] = ()  # annotations, sorted
    rule_id: str = ""  # chained SHA-224, base64url-truncated; unique within a policy/profile


@dataclass(frozen=True)
class Policy:
    namespace: str = ""
    inbound_rules: tuple[Rule, ...] = ()
    outbound_rules: tuple[Rule, ...] = ()
    untracked: bool = False
    pre_dnat: bool = False
    apply_on_forward: bool = False
    original_selector: str = ""
    staged: bool = False
    tier: str = ""


@dataclass(frozen=True)
class Profile:
    inbound_rules: tuple[Rule, ...] = ()
    outbound_rules: tuple[Rule, ...] = ()


@dataclass(frozen=True)
class TierInfo:
    name: str
    ingress_policies: tuple[PolicyID, ...] = ()
    egress_policies: tuple[PolicyID, ...] = ()
    default_action: str = "Deny"  # Deny | Pass


@dataclass(frozen=True)
class NatInfo:
    ext_ip: str
    int_ip: str


@dataclass(frozen=True)
class WorkloadEndpoint:
    state: str
    name: str  # host-side interface name
    mac: str = ""
    profile_ids: tuple[str, ...] = ()
    ipv4_nets: tuple[str, ...] = ()
    ipv6_nets: tuple[str, ...] = ()
    tiers: tuple[TierInfo, ...] = ()
    ipv4_nat: tuple[NatInfo, ...] = ()
    ipv6_nat: tuple[NatInfo, ...] = ()
    allow_spoofed_source_prefixes: tuple[str, ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    # The BGPPeer (localWorkloadSelector) confd peers with this workload as; "" = none
    # (upstream's LocalBGPPeer.bgp_peer_name; written to the endpoint status file).
    bgp_peer_name: str = ""


@dataclass(frozen=True)
class HostEndpoint:
    name: str  # interface name, "" when matched by expected IPs, "*" for all-interfaces
    profile_ids: tuple[str, ...] = ()
    tiers: tuple[TierInfo, ...] = ()
    untracked_tiers: tuple[TierInfo, ...] = ()
    pre_dnat_tiers: tuple[TierInfo, ...] = ()
    forward_tiers: tuple[TierInfo, ...] = ()
    expected_ipv4_addrs: tuple[str, ...] = ()
    expected_ipv6_addrs: tuple[str, ...] = ()


# --- messages ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class InSync:
    """The calc graph has flushed a complete picture; the dataplane may now program it."""


@dataclass(frozen=True)
class ConfigUpdate:
    config: dict[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class DatastoreNotReady:
    """ClusterInformation says datastoreReady: false (internal; upstream exits/waits)."""


@dataclass(frozen=True)
class IPSetUpdate:
    id: str
    members: tuple[str, ...]
    type: IPSetType


@dataclass(frozen=True)
class IPSetDeltaUpdate:
    id: str
    added_members: tuple[str, ...] = ()
    removed_members: tuple[str, ...] = ()


@dataclass(frozen=True)
class IPSetRemove:
    id: str


@dataclass(frozen=True)
class ActivePolicyUpdate:
    id: PolicyID
    policy: Policy


@dataclass(frozen=True)
class ActivePolicyRemove:
    id: PolicyID


@dataclass(frozen=True)
class PolicyPrepare:
    """A policy no local endpoint uses yet, parsed while Felix is idle: the dataplane may
    render it ahead of its activation, and programs nothing for it. Not a message of
    upstream's protocol: an in-process cache warm-up (design/felix-calc.md "Preparing
    inactive policies"). The ``policy`` object is the one a later ``ActivePolicyUpdate``
    for an unchanged policy carries."""

    id: PolicyID
    policy: Policy


@dataclass(frozen=True)
class ActiveProfileUpdate:
    id: ProfileID
    profile: Profile


@dataclass(frozen=True)
class ActiveProfileRemove:
    id: ProfileID


@dataclass(frozen=True)
class WorkloadEndpointUpdate:
    id: WorkloadEndpointID
    endpoint: WorkloadEndpoint


@dataclass(frozen=True)
class WorkloadEndpointRemove:
    id: WorkloadEndpointID


@dataclass(frozen=True)
class HostEndpointUpdate:
    id: HostEndpointID
    endpoint: HostEndpoint


@dataclass(frozen=True)
class HostEndpointRemove:
    id: HostEndpointID


@dataclass(frozen=True)
class HostMetadataUpdate:
    hostname: str
    ipv4_addr: str = ""


@dataclass(frozen=True)
class HostMetadataV4V6Update:
    hostname: str
    ipv4_addr: str = ""
    ipv6_addr: str = ""
    asnumber: str = ""
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class HostMetadataRemove:
    hostname: str


@dataclass(frozen=True)
class HostMetadataV4V6Remove:
    hostname: str


@dataclass(frozen=True)
class IPAMPool:
    cidr: str
    masquerade: bool = False
    ipip_mode: str = "Never"
    vxlan_mode: str = "Never"


@dataclass(frozen=True)
class IPAMPoolUpdate:
    id: str  # CIDR with "/" replaced by "-"
    pool: IPAMPool


@dataclass(frozen=True)
class IPAMPoolRemove:
    id: str


@dataclass(frozen=True)
class ServiceAccountUpdate:
    id: ServiceAccountID
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ServiceAccountRemove:
    id: ServiceAccountID


@dataclass(frozen=True)
class NamespaceUpdate:
    id: NamespaceID
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class NamespaceRemove:
    id: NamespaceID


class RouteType(Enum):
    REMOTE_WORKLOAD = "REMOTE_WORKLOAD"
    REMOTE_HOST = "REMOTE_HOST"
    LOCAL_WORKLOAD = "LOCAL_WORKLOAD"
    LOCAL_HOST = "LOCAL_HOST"
    REMOTE_TUNNEL = "REMOTE_TUNNEL"
    LOCAL_TUNNEL = "LOCAL_TUNNEL"
    CIDR_INFO = "CIDR_INFO"


class IPPoolType(Enum):
    NONE = "NONE"
    NO_ENCAP = "NO_ENCAP"
    VXLAN = "VXLAN"
    IPIP = "IPIP"


@dataclass(frozen=True)
class RouteUpdate:
    dst: str
    types: frozenset[RouteType] = frozenset()
    ip_pool_type: IPPoolType = IPPoolType.NONE
    dst_node_name: str = ""
    dst_node_ip: str = ""
    same_subnet: bool = False
    nat_outgoing: bool = False
    local_workload: bool = False
    tunnel_type: str = ""
    borrowed: bool = False


@dataclass(frozen=True)
class RouteRemove:
    dst: str


@dataclass(frozen=True)
class VXLANTunnelEndpointUpdate:
    node: str
    mac: str = ""
    ipv4_addr: str = ""
    parent_device_ip: str = ""
    mac_v6: str = ""
    ipv6_addr: str = ""
    parent_device_ipv6: str = ""


@dataclass(frozen=True)
class VXLANTunnelEndpointRemove:
    node: str


@dataclass(frozen=True)
class WireguardEndpointUpdate:
    hostname: str
    public_key: str = ""
    interface_ipv4_addr: str = ""


@dataclass(frozen=True)
class WireguardEndpointRemove:
    hostname: str


@dataclass(frozen=True)
class WireguardEndpointV6Update:
    hostname: str
    public_key_v6: str = ""
    interface_ipv6_addr: str = ""


@dataclass(frozen=True)
class WireguardEndpointV6Remove:
    hostname: str


@dataclass(frozen=True)
class GlobalBGPConfigUpdate:
    service_cluster_cidrs: tuple[str, ...] = ()
    service_external_cidrs: tuple[str, ...] = ()
    service_loadbalancer_cidrs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Encapsulation:
    ipip_enabled: bool = False
    vxlan_enabled: bool = False
    vxlan_enabled_v6: bool = False


@dataclass(frozen=True)
class ServicePort:
    protocol: str
    port: int
    node_port: int = 0
    name: str = ""  # the port's name in the Service (flow logs' dest_service_port_name)


@dataclass(frozen=True)
class ServiceUpdate:
    name: str
    namespace: str
    type: str = ""
    cluster_ips: tuple[str, ...] = ()
    loadbalancer_ips: tuple[str, ...] = ()
    external_ips: tuple[str, ...] = ()
    ports: tuple[ServicePort, ...] = ()


@dataclass(frozen=True)
class ServiceRemove:
    name: str
    namespace: str


# Everything the calc graph may emit (for type checks and exhaustive dispatch in the dataplane).
ToDataplane = (
    InSync
    | ConfigUpdate
    | DatastoreNotReady
    | IPSetUpdate
    | IPSetDeltaUpdate
    | IPSetRemove
    | ActivePolicyUpdate
    | ActivePolicyRemove
    | PolicyPrepare
    | ActiveProfileUpdate
    | ActiveProfileRemove
    | WorkloadEndpointUpdate
    | WorkloadEndpointRemove
    | HostEndpointUpdate
    | HostEndpointRemove
    | HostMetadataUpdate
    | HostMetadataV4V6Update
    | HostMetadataRemove
    | HostMetadataV4V6Remove
    | IPAMPoolUpdate
    | IPAMPoolRemove
    | ServiceAccountUpdate
    | ServiceAccountRemove
    | NamespaceUpdate
    | NamespaceRemove
    | RouteUpdate
    | RouteRemove
    | VXLANTunnelEndpointUpdate
    | VXLANTunnelEndpointRemove
    | WireguardEndpointUpdate
    | WireguardEndpointRemove
    | WireguardEndpointV6Update
    | WireguardEndpointV6Remove
    | GlobalBGPConfigUpdate
    | Encapsulation
    | ServiceUpdate
    | ServiceRemove
)

__all__ = [name for name in dir() if not name.startswith("_") and name not in ("Any",)]
_ = Any
