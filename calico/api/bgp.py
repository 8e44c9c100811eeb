"""BGP resources: BGPConfiguration, BGPPeer and BGPFilter (read by confd to render BIRD).

Re-exports the types other BGP-ish models share, defined in :mod:`calico.api.fieldtypes`:
``ASNumber`` (plain ``64512`` or dotted ``1.10``, stored as the integer), ``Duration`` (Go
duration text, kept as written), ``Selector``; home of the Kubernetes ``SecretKeySelector``
used for BGP passwords.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from calico.api import validators as v
from calico.api.base import CalicoModel, Resource, register
from calico.api.fieldtypes import (  # noqa: F401 (re-exported: their former home)
    _LOG_LEVELS,
    INT_OR_STRING,
    ASNumber,
    ClusterRoutes,
    Duration,
    LogSeverity,
    Selector,
    _as_number,
    _log_severity,
)


class SecretKeySelector(CalicoModel):
    """A key in a Secret in calico-node's namespace (Kubernetes ``SecretKeySelector``)."""

    key: str
    name: str = ""
    optional: bool | None = None


class BGPPassword(CalicoModel):
    secret_key_ref: SecretKeySelector | None = None


# --- BGPConfiguration -------------------------------------------------------------------------


class ServiceCIDRBlock(CalicoModel):
    """One service IP range to advertise (cluster, external or load-balancer IPs)."""

    cidr: Annotated[str, AfterValidator(v.cidr)] = ""


_COMMUNITY = re.compile(r"^(\d+):(\d+)$|^(\d+):(\d+):(\d+)$")


def _community_value(value: str) -> str:
    """``aa:nn`` (standard, 16-bit halves) or ``aa:nn:mm`` (large, 32-bit parts)."""
    m = _COMMUNITY.match(value)
    if not m:
        raise ValueError(f"community value {value!r} must be of the form aa:nn or aa:nn:mm")
    if m.group(1) is not None:
        if int(m.group(1)) > 0xFFFF or int(m.group(2)) > 0xFFFF:
            raise ValueError(
                f"standard community value {value!r}: each part must be a 16-bit number"
            )
    elif any(int(p) > 0xFFFFFFFF for p in m.group(3, 4, 5)):
        raise ValueError(f"large community value {value!r}: each part must be a 32-bit number")
    return value


class Community(CalicoModel):
    name: Annotated[str, AfterValidator(lambda s: v.dns1123_subdomain(s, "community name"))]
    value: Annotated[str, AfterValidator(_community_value)]


class PrefixAdvertisement(CalicoModel):
    cidr: Annotated[str, AfterValidator(v.cidr)]
    communities: list[str] = Field(default_factory=list)


class BGPConfigurationSpec(CalicoModel):
    """Cluster-wide (``default``) or per-node (``node.<name>``) BGP settings."""

    log_severity_screen: LogSeverity | None = None
    node_to_node_mesh_enabled: bool | None = None
    as_number: ASNumber | None = None
    service_load_balancer_ips: list[ServiceCIDRBlock] | None = Field(
        default=None, alias="serviceLoadBalancerIPs"
    )
    service_external_ips: list[ServiceCIDRBlock] | None = Field(
        default=None, alias="serviceExternalIPs"
    )
    service_cluster_ips: list[ServiceCIDRBlock] | None = Field(
        default=None, alias="serviceClusterIPs"
    )
    service_load_balancer_aggregation: Literal["Enabled", "Disabled"] | None = None
    communities: list[Community] | None = None
    prefix_advertisements: list[PrefixAdvertisement] | None = None
    listen_port: Annotated[int, Field(ge=1, le=65535)] | None = None
    node_mesh_password: BGPPassword | None = None
    node_mesh_max_restart_time: Duration | None = None
    bind_mode: Literal["None", "NodeIP"] | None = None
    ignored_interfaces: list[str] | None = None
    local_workload_peering_ipv4: Annotated[str, AfterValidator(lambda s: v.ip_address(s, 4))] | (
        None
    ) = Field(default=None, alias="localWorkloadPeeringIPV4")
    local_workload_peering_ipv6: Annotated[str, AfterValidator(lambda s: v.ip_address(s, 6))] | (
        None
    ) = Field(default=None, alias="localWorkloadPeeringIPV6")
    # Which classes of IP pool BIRD programs cluster routes for (FelixConfiguration has the
    # complementary field). No default is filled in: confd treats unset as EnabledNoEncapOnly.
    program_cluster_routes: ClusterRoutes | None = None

    @model_validator(mode="after")
    def _cross_checks(self) -> BGPConfigurationSpec:
        if self.node_to_node_mesh_enabled is False:
            if self.node_mesh_password is not None:
                v.raise_at(
                    ("nodeMeshPassword",),
                    "nodeMeshPassword cannot be set when nodeToNodeMeshEnabled is false",
                )
            if self.node_mesh_max_restart_time is not None:
                v.raise_at(
                    ("nodeMeshMaxRestartTime",),
                    "nodeMeshMaxRestartTime cannot be set when nodeToNodeMeshEnabled is false",
                )
        names = {c.name for c in self.communities or []}
        for i, adv in enumerate(self.prefix_advertisements or []):
            for j, community in enumerate(adv.communities):
                if community in names:
                    continue
                try:
                    _community_value(community)
                except ValueError:
                    v.raise_at(
                        ("prefixAdvertisements", i, "communities", j),
                        f"community {community!r} is neither defined in spec.communities "
                        "nor a value of the form aa:nn or aa:nn:mm",
                        community,
                    )
        return self


# attribute -> (wire name, the name upstream's "Cannot set" message uses)
_DEFAULT_ONLY_BGP = {
    "node_to_node_mesh_enabled": ("nodeToNodeMeshEnabled", "nodeToNodeMeshEnabled"),
    "as_number": ("asNumber", "ASNumber"),
    "node_mesh_password": ("nodeMeshPassword", "nodeMeshPassword"),
    "node_mesh_max_restart_time": ("nodeMeshMaxRestartTime", "nodeMeshMaxRestartTime"),
}


@register
class BGPConfiguration(Resource):
    KIND: ClassVar[str] = "BGPConfiguration"

    kind: str = "BGPConfiguration"
    spec: BGPConfigurationSpec = Field(default_factory=BGPConfigurationSpec)

    @model_validator(mode="after")
    def _node_specific_rules(self) -> BGPConfiguration:
        if self.metadata.name and self.metadata.name != "default":
            for attr, (wire, said) in _DEFAULT_ONLY_BGP.items():
                if getattr(self.spec, attr) is not None:
                    v.raise_at(
                        ("spec", wire),
                        f"Cannot set {said} on a non default BGP Configuration.",
                        getattr(self.spec, attr),
                    )
        return self


# --- BGPPeer ----------------------------------------------------------------------------------


def _peer_ip(value: str) -> str:
    if value:
        v.split_ip_port(value)
    return value


class BGPPeerSpec(CalicoModel):
    """Who peers with whom: ``node``/``nodeSelector`` pick the local side, ``peerIP``,
    ``peerSelector`` or ``localWorkloadSelector`` the remote side."""

    node: Annotated[str, Field(max_length=253), AfterValidator(v.node_name)] | None = None
    node_selector: Annotated[Selector, Field(max_length=1024)] | None = None
    peer_ip: Annotated[str, AfterValidator(_peer_ip), Field(max_length=64)] | None = Field(
        default=None, alias="peerIP"
    )
    as_number: ASNumber | None = None
    local_as_number: ASNumber | None = Field(default=None, alias="localASNumber")
    peer_selector: Annotated[Selector, Field(max_length=1024)] | None = None
    local_workload_selector: Annotated[Selector, Field(max_length=1024)] | None = None
    keep_original_next_hop: bool | None = None
    next_hop_mode: Literal["Auto", "Self", "Keep"] | None = None
    password: BGPPassword | None = None
    source_address: Literal["UseNodeIP", "None"] | None = None
    max_restart_time: Duration | None = None
    keepalive_time: Duration | None = None
    num_allowed_local_as_numbers: Annotated[int, Field(ge=0, le=2147483647)] | None = Field(
        default=None, alias="numAllowedLocalASNumbers"
    )
    ttl_security: Annotated[int, Field(ge=0, le=255)] | None = Field(
        default=None, alias="ttlSecurity"
    )
    filters: list[str] | None = None
    reachable_by: Annotated[str, AfterValidator(v.ip_address), Field(max_length=64)] | None = None
    reverse_peering: Literal["Auto", "Manual"] | None = None

    @model_validator(mode="after")
    def _exclusive_fields(self) -> BGPPeerSpec:
        if self.node and self.node_selector:
            v.raise_at(("nodeSelector",), "node and nodeSelector cannot both be set")
        if self.peer_ip and self.peer_selector:
            v.raise_at(("peerSelector",), "peerIP and peerSelector cannot both be set")
        if self.peer_selector and self.as_number:
            v.raise_at(("asNumber",), "asNumber must be empty when peerSelector is set")
        if self.local_workload_selector:
            if self.peer_ip:
                v.raise_at(("peerIP",), "peerIP must be empty when localWorkloadSelector is set")
            if self.peer_selector:
                v.raise_at(
                    ("peerSelector",),
                    "peerSelector must be empty when localWorkloadSelector is set",
                )
            if not self.as_number:
                v.raise_at(("asNumber",), "asNumber is required when localWorkloadSelector is set")
        if self.reachable_by:
            if not self.peer_ip:
                v.raise_at(("reachableBy",), "reachableBy must be empty when peerIP is empty")
            peer = ipaddress.ip_address(v.split_ip_port(self.peer_ip)[0])
            if ipaddress.ip_address(self.reachable_by).version != peer.version:
                v.raise_at(
                    ("reachableBy",),
                    "reachableBy must be the same IP family as peerIP",
                    self.reachable_by,
                )
        if self.keep_original_next_hop and self.next_hop_mode is not None:
            v.raise_at(
                ("nextHopMode",),
                "keepOriginalNextHop and nextHopMode cannot both be set; keepOriginalNextHop "
                "is deprecated, use nextHopMode instead",
            )
        return self


@register
class BGPPeer(Resource):
    KIND: ClassVar[str] = "BGPPeer"

    kind: str = "BGPPeer"
    spec: BGPPeerSpec = Field(default_factory=BGPPeerSpec)


# --- BGPFilter --------------------------------------------------------------------------------

_IFACE = re.compile(r"^[a-zA-Z0-9_.*\-]{1,15}$")


def _interface(value: str) -> str:
    """An interface name, or a pattern with ``*`` wildcards (BIRD ``ifname ~``)."""
    if not _IFACE.match(value):
        raise ValueError(
            f"interface {value!r} must be 1-15 characters of letters, digits, '_', '-', '.' or '*'"
        )
    return value


class BGPFilterPrefixLength(CalicoModel):
    min: int | None = None
    max: int | None = None


_NO_LEADING_ZERO = re.compile(r"^(0|[1-9]\d*)(:(0|[1-9]\d*)){1,2}$")


def _filter_community(value: str) -> str:
    """A BGPFilter community (``aa:nn`` or ``aa:nn:mm``): upstream's pattern also refuses
    leading zeros and anything longer than 32 characters."""
    if len(value) > 32 or not _NO_LEADING_ZERO.match(value):
        raise ValueError(
            f"community value {value!r} must be of the form aa:nn or aa:nn:mm "
            "(decimal numbers without leading zeros, at most 32 characters)"
        )
    return _community_value(value)


BGPCommunityValue = Annotated[str, AfterValidator(_filter_community)]
RoutePriority = Annotated[int, Field(ge=1, le=2147483646)]


class BGPFilterCommunityMatch(CalicoModel):
    """Match routes carrying a community; upstream allows exactly one value for now."""

    values: Annotated[list[BGPCommunityValue], Field(min_length=1, max_length=1)]


class BGPFilterAddCommunity(CalicoModel):
    value: BGPCommunityValue


class BGPFilterPrependASPath(CalicoModel):
    prefix: Annotated[list[ASNumber], Field(min_length=1, max_length=10)]


class BGPFilterSetPriority(CalicoModel):
    value: RoutePriority


class BGPFilterOperation(CalicoModel):
    """One route modification of an Accept rule: exactly one of the three fields is set."""

    add_community: BGPFilterAddCommunity | None = None
    prepend_as_path: BGPFilterPrependASPath | None = Field(default=None, alias="prependASPath")
    set_priority: BGPFilterSetPriority | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> BGPFilterOperation:
        chosen = [self.add_community, self.prepend_as_path, self.set_priority]
        if sum(op is not None for op in chosen) != 1:
            raise ValueError("exactly one operation must be set")
        return self


class _FilterRule(CalicoModel):
    """One ordered filter rule; shared by the IPv4 and IPv6 variants."""

    VERSION: ClassVar[int] = 4
    MAX_LEN: ClassVar[int] = 32

    cidr: str | None = None
    prefix_length: BGPFilterPrefixLength | None = None
    source: Literal["RemotePeers"] | None = None
    interface: Annotated[str, AfterValidator(_interface)] | None = None
    match_operator: Literal["Equal", "NotEqual", "In", "NotIn"] | None = None
    peer_type: Literal["eBGP", "iBGP"] | None = None
    communities: BGPFilterCommunityMatch | None = None
    as_path_prefix: list[ASNumber] | None = Field(default=None, alias="asPathPrefix")
    priority: RoutePriority | None = None
    action: Literal["Accept", "Reject"]
    operations: Annotated[list[BGPFilterOperation], Field(min_length=1, max_length=10)] | None = (
        None
    )

    @model_validator(mode="after")
    def _rule_checks(self) -> _FilterRule:
        if self.operations and self.action != "Accept":
            v.raise_at(("operations",), "operations may only be used with action Accept")
        if self.cidr is not None:
            try:
                v.cidr(self.cidr, version=self.VERSION)
            except ValueError as exc:
                v.raise_at(("cidr",), str(exc), self.cidr)
        if bool(self.cidr) != bool(self.match_operator):
            v.raise_at(("matchOperator",), "cidr and matchOperator must both be set or both unset")
        pl = self.prefix_length
        if pl is not None:
            if not self.cidr:
                v.raise_at(("prefixLength",), "prefixLength can only be set together with cidr")
            for attr in ("min", "max"):
                n = getattr(pl, attr)
                if n is not None and not 0 <= n <= self.MAX_LEN:
                    v.raise_at(
                        ("prefixLength", attr),
                        f"prefixLength.{attr} {n} is out of range 0-{self.MAX_LEN}",
                        n,
                    )
            if pl.min is not None and pl.max is not None and pl.min > pl.max:
                v.raise_at(("prefixLength",), "prefixLength.min must not be greater than max")
            if self.cidr and pl.min is not None:
                net_len = ipaddress.ip_network(self.cidr, strict=False).prefixlen
                if pl.min < net_len:
                    v.raise_at(
                        ("prefixLength", "min"),
                        f"prefixLength.min {pl.min} is shorter than the cidr prefix /{net_len}",
                        pl.min,
                    )
        return self


class BGPFilterRuleV4(_FilterRule):
    VERSION: ClassVar[int] = 4
    MAX_LEN: ClassVar[int] = 32


class BGPFilterRuleV6(_FilterRule):
    VERSION: ClassVar[int] = 6
    MAX_LEN: ClassVar[int] = 128


class BGPFilterSpec(CalicoModel):
    export_v4: list[BGPFilterRuleV4] | None = Field(default=None, alias="exportV4")
    import_v4: list[BGPFilterRuleV4] | None = Field(default=None, alias="importV4")
    export_v6: list[BGPFilterRuleV6] | None = Field(default=None, alias="exportV6")
    import_v6: list[BGPFilterRuleV6] | None = Field(default=None, alias="importV6")

    @model_validator(mode="after")
    def _import_rules_have_no_source(self) -> BGPFilterSpec:
        # Every imported route comes from a peer, so upstream refuses a source match there.
        for wire, rules in (("importV4", self.import_v4), ("importV6", self.import_v6)):
            for i, rule in enumerate(rules or []):
                if rule.source:
                    v.raise_at(
                        (wire, i, "source"), "source is not applicable to import rules", rule.source
                    )
        return self


@register
class BGPFilter(Resource):
    KIND: ClassVar[str] = "BGPFilter"

    kind: str = "BGPFilter"
    spec: BGPFilterSpec = Field(default_factory=BGPFilterSpec)
