"""FelixConfiguration: Felix's datastore-held settings, cluster-wide (``default``), per node
(``node.<nodename>``) or for the nodes a ``nodeSelector`` matches.

Every field is optional: an unset field means "fall through to the next config source"
(env, config file, built-in default), so the spec never fills in defaults itself. Values keep
upstream's spelling (durations as Go duration text, case-insensitive enums as written) so that
what the user wrote round-trips exactly.
"""

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from calico.api import validators as v
from calico.api.base import CalicoModel, Resource, register
from calico.api.fieldtypes import INT_OR_STRING, ClusterRoutes, Duration, LogSeverity, Selector
from calico.api.rules import DSCPValue


def one_of(*choices: str) -> Any:
    """A string enum matched case-insensitively (as Felix parses it), kept as written."""
    lowered = {c.lower() for c in choices}

    def check(value: str) -> str:
        if value and value.lower() not in lowered:
            raise ValueError(f"{value!r} is not one of {', '.join(choices)} (case-insensitive)")
        return value

    return Annotated[str, AfterValidator(check), WithJsonSchema({"type": "string"})]


def _pattern(regex: str, rule: str) -> Any:
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"{value!r} {rule}")
        return value

    return Annotated[str, AfterValidator(check)]


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{value!r} is not a valid regular expression: {exc}") from None
    return value


def _port_range(value: int | str) -> int | str:
    """A port (``8080``) or an inclusive range (``30000:32767``), as upstream numorstring.Port."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a port or port range")
    if isinstance(value, int):
        return v.port_number(value)
    m = re.fullmatch(r"(\d+)(?::(\d+))?", value)
    if not m:
        raise ValueError(f"{value!r} is not a port or a port range of the form min:max")
    low = int(m.group(1))
    high = int(m.group(2)) if m.group(2) else low
    v.port_number(low)
    v.port_number(high)
    if low > high:
        raise ValueError(f"port range {value!r}: the minimum is greater than the maximum")
    return value


def _conntrack_timeout(value: str) -> str:
    return value if value == "Auto" else v.duration(value)


Net = Annotated[str, AfterValidator(v.cidr)]
Regex = Annotated[str, AfterValidator(_regex)]
Port = Annotated[int, Field(ge=0, le=65535)]
PortRange = Annotated[int | str, AfterValidator(_port_range), WithJsonSchema(INT_OR_STRING)]
IPv4 = Annotated[str, AfterValidator(lambda s: v.ip_address(s, 4))]
IPv6 = Annotated[str, AfterValidator(lambda s: v.ip_address(s, 6))]
ConntrackTimeout = Annotated[str, AfterValidator(_conntrack_timeout)]
IfaceName = _pattern(r"[a-zA-Z0-9_.\-]{1,15}", "is not a valid interface name (1-15 characters)")
OpenstackRegion = Annotated[str, AfterValidator(lambda s: v.dns1123_label(s, "openstackRegion"))]
FeatureDetectOverride = _pattern(
    r"([a-zA-Z0-9\-_]+=(true|false|),)*([a-zA-Z0-9\-_]+=(true|false|))?",
    "must be a comma-separated list of Feature=true|false|<empty>",
)
FeatureGates = _pattern(
    r"([a-zA-Z0-9\-_]+=([^=,]+),)*([a-zA-Z0-9\-_]+=([^=,]+))?",
    "must be a comma-separated list of Gate=value",
)
RateLimit = _pattern(
    r"[1-9]\d{0,3}/(second|minute|hour|day)", "must be of the form N/second|minute|hour|day"
)
LogPrefix = _pattern(r"[a-zA-Z0-9%: /_\-]*", "may only contain letters, digits, '%: /_-'")

AllowAction = one_of("Accept", "Return")
IptablesBackend = one_of("Auto", "Legacy", "NFT")
SourceSpoofing = one_of("Disabled", "Any")
ConntrackScaling = one_of("Disabled", "DoubleIfFull")
EnforceRPF = one_of("Disabled", "Strict", "Loose")
EndpointToHostAction = one_of("Drop", "Accept", "Return")
DenyAction = one_of("Drop", "Reject")
LoopPrevention = one_of("Drop", "Reject", "Disabled")
ChainInsertMode = one_of("Insert", "Append")
BPFLogLevel = one_of("Off", "Info", "Debug")
ExternalServiceMode = one_of("Tunnel", "DSR")
RouteSource = one_of("WorkloadIPs", "CalicoIPAM")

PROTOCOLS = ("tcp", "udp", "sctp")


class ProtoPort(CalicoModel):
    """A failsafe port: protocol, port and an optional CIDR the peer must be in.

    The wire form is the object; the config-file shorthand (``tcp:22``, ``udp:68``,
    ``tcp:10.0.0.0/8:22``, ``tcp:[fd00::/8]:22``) is accepted on input and by ``parse``.
    """

    protocol: str = "tcp"
    port: Port
    net: Net | None = None

    @field_validator("protocol")
    @classmethod
    def _protocol(cls, value: str) -> str:
        if value.lower() not in PROTOCOLS:
            raise ValueError(f"protocol {value!r} must be one of TCP, UDP, SCTP")
        return value

    @classmethod
    def parse(cls, text: str) -> "ProtoPort":
        """Parse the ``proto:[net:]port`` shorthand Felix's env/config file uses."""
        return cls.model_validate(_split_proto_port(text))


def _split_proto_port(text: str) -> dict[str, Any]:
    bad = ValueError(
        f"{text!r} is not of the form [protocol:][net:]port, e.g. tcp:22 or tcp:10.0.0.0/8:22"
    )
    if m := re.fullmatch(r"(?:(\w+):)?\[([^\]]+)\]:(\d+)", text):
        proto, net, port = m.groups()
    else:
        parts = text.split(":")
        if len(parts) == 1:
            proto, net, port = None, None, parts[0]
        elif len(parts) == 2:
            proto, net, port = parts[0], None, parts[1]
        elif len(parts) == 3:
            proto, net, port = parts
        else:
            raise bad
    if not port.isdigit():
        raise bad
    out: dict[str, Any] = {"protocol": proto or "tcp", "port": int(port)}
    if net:
        out["net"] = net
    return out


def _proto_port_input(value: Any) -> Any:
    return _split_proto_port(value) if isinstance(value, str) else value


ProtoPortItem = Annotated[ProtoPort, BeforeValidator(_proto_port_input)]


class HealthTimeoutOverride(CalicoModel):
    name: str
    timeout: Duration


class RouteTableRange(CalicoModel):
    """The legacy single range of kernel route table indices Felix may use (1-250)."""

    min: int
    max: int

    @model_validator(mode="after")
    def _bounds(self) -> "RouteTableRange":
        if not 1 <= self.min <= self.max <= 250:
            raise ValueError("must be a range of route table indices within 1..250")
        return self


class RouteTableIDRange(CalicoModel):
    min: int
    max: Annotated[int, Field(le=4294967295)]

    @model_validator(mode="after")
    def _bounds(self) -> "RouteTableIDRange":
        if self.min < 1:
            v.raise_at(("min",), "min must be >= 1", self.min)
        if self.min > self.max:
            v.raise_at(("min",), "min must not be greater than max", self.min)
        return self


class BPFConntrackTimeouts(CalicoModel):
    """Per-state conntrack timeouts for the eBPF dataplane; ``Auto`` picks the kernel's."""

    creation_grace_period: ConntrackTimeout | None = None
    tcp_syn_sent: ConntrackTimeout | None = None
    tcp_established: ConntrackTimeout | None = None
    tcp_fins_seen: ConntrackTimeout | None = None
    tcp_reset_seen: ConntrackTimeout | None = None
    udp_timeout: ConntrackTimeout | None = None
    generic_timeout: ConntrackTimeout | None = None
    icmp_timeout: ConntrackTimeout | None = None


class FelixConfigurationSpec(CalicoModel):
    """All of Felix's datastore parameters (upstream field names; unset = not configured)."""

    allow_ipip_packets_from_workloads: bool | None = Field(
        default=None, alias="allowIPIPPacketsFromWorkloads"
    )
    allow_vxlan_packets_from_workloads: bool | None = Field(
        default=None, alias="allowVXLANPacketsFromWorkloads"
    )
    aws_src_dst_check: Literal["DoNothing", "Enable", "Disable"] | None = None
    bpf_attach_type: Literal["TC", "TCX"] | None = None
    bpf_ctlb_log_filter: str | None = Field(default=None, alias="bpfCTLBLogFilter")
    bpf_connect_time_load_balancing: Literal["TCP", "Enabled", "Disabled"] | None = None
    bpf_connect_time_load_balancing_enabled: bool | None = None
    bpf_conntrack_log_level: Literal["Off", "Debug"] | None = None
    bpf_conntrack_mode: Literal["Auto", "Userspace", "BPFProgram"] | None = None
    bpf_conntrack_timeouts: BPFConntrackTimeouts | None = None
    bpf_dsr_optout_cidrs: list[Net] | None = Field(default=None, alias="bpfDSROptoutCIDRs")
    bpf_data_iface_pattern: Regex | None = None
    bpf_disable_gro_for_ifaces: Regex | None = Field(default=None, alias="bpfDisableGROForIfaces")
    bpf_disable_unprivileged: bool | None = None
    bpf_enabled: bool | None = None
    bpf_enforce_rpf: EnforceRPF | None = Field(default=None, alias="bpfEnforceRPF")
    bpf_exclude_cidrs_from_nat: list[Net] | None = Field(
        default=None, alias="bpfExcludeCIDRsFromNAT"
    )
    bpf_export_buffer_size_mb: Annotated[int, Field(ge=0)] | None = Field(
        default=None, alias="bpfExportBufferSizeMB"
    )
    bpf_ext_to_service_connmark: Annotated[int, Field(ge=0, le=4294967295)] | None = None
    bpf_external_service_mode: ExternalServiceMode | None = None
    bpf_force_track_packets_from_ifaces: list[str] | None = None
    bpf_host_conntrack_bypass: bool | None = None
    bpf_ip_frag_timeout: Duration | None = Field(default=None, alias="bpfIPFragTimeout")
    bpf_ip_fragment_reassembly_enabled: bool | None = Field(
        default=None, alias="bpfIPFragmentReassemblyEnabled"
    )
    bpf_host_networked_nat_without_ctlb: Literal["Enabled", "Disabled"] | None = Field(
        default=None, alias="bpfHostNetworkedNATWithoutCTLB"
    )
    bpf_jit_hardening: Literal["Auto", "Strict"] | None = Field(
        default=None, alias="bpfJITHardening"
    )
    bpf_kube_proxy_healthz_port: Port | None = None
    bpf_kube_proxy_iptables_cleanup_enabled: bool | None = None
    bpf_kube_proxy_min_sync_period: Duration | None = None
    bpf_l3_iface_pattern: Regex | None = None
    bpf_log_filters: dict[str, str] | None = None
    bpf_log_level: BPFLogLevel | None = None
    bpf_maglev_max_endpoints_per_service: Annotated[int, Field(ge=1, le=3000)] | None = None
    bpf_maglev_max_services: Annotated[int, Field(ge=1, le=3000)] | None = None
    bpf_map_size_conntrack: Annotated[int, Field(ge=1)] | None = None
    bpf_map_size_conntrack_cleanup_queue: Annotated[int, Field(ge=1)] | None = None
    bpf_map_size_conntrack_scaling: ConntrackScaling | None = None
    bpf_map_size_ip_sets: Annotated[int, Field(ge=1)] | None = Field(
        default=None, alias="bpfMapSizeIPSets"
    )
    bpf_map_size_if_state: Annotated[int, Field(ge=1)] | None = None
    bpf_map_size_nat_affinity: Annotated[int, Field(ge=1)] | None = Field(
        default=None, alias="bpfMapSizeNATAffinity"
    )
    bpf_map_size_nat_backend: Annotated[int, Field(ge=1)] | None = Field(
        default=None, alias="bpfMapSizeNATBackend"
    )
    bpf_map_size_nat_frontend: Annotated[int, Field(ge=1)] | None = Field(
        default=None, alias="bpfMapSizeNATFrontend"
    )
    bpf_map_size_per_cpu_conntrack: Annotated[int, Field(ge=1)] | None = None
    bpf_map_size_route: Annotated[int, Field(ge=1)] | None = None
    bpf_overlay_host_source_ip: Literal["TunnelAddress", "HostAddress"] | None = Field(
        default=None, alias="bpfOverlayHostSourceIP"
    )
    bpf_psnat_ports: PortRange | None = Field(default=None, alias="bpfPSNATPorts")
    bpf_policy_debug_enabled: bool | None = None
    bpf_profiling: Literal["Enabled", "Disabled"] | None = None
    bpf_redirect_to_peer: Literal["Enabled", "Disabled"] | None = None
    cgroup_v2_path: str | None = None
    chain_insert_mode: ChainInsertMode | None = None
    dataplane_driver: str | None = None
    dataplane_watchdog_timeout: Duration | None = None
    debug_disable_log_dropping: bool | None = None
    debug_host: str | None = None
    debug_memory_profile_path: str | None = None
    debug_port: Port | None = None
    debug_simulate_calc_graph_hang_after: Duration | None = None
    debug_simulate_dataplane_apply_delay: Duration | None = None
    debug_simulate_dataplane_hang_after: Duration | None = None
    default_endpoint_to_host_action: EndpointToHostAction | None = None
    device_route_protocol: Annotated[int, Field(ge=0, le=255)] | None = None
    device_route_source_address: IPv4 | None = None
    device_route_source_address_ipv6: IPv6 | None = Field(
        default=None, alias="deviceRouteSourceAddressIPv6"
    )
    disable_conntrack_invalid_check: bool | None = None
    endpoint_reporting_delay: Duration | None = None
    endpoint_reporting_enabled: bool | None = None
    endpoint_status_path_prefix: str | None = None
    external_nodes_list: list[Net] | None = None
    failsafe_inbound_host_ports: list[ProtoPortItem] | None = None
    failsafe_outbound_host_ports: list[ProtoPortItem] | None = None
    feature_detect_override: FeatureDetectOverride | None = None
    feature_gates: FeatureGates | None = None
    floating_ips: Literal["Enabled", "Disabled"] | None = Field(default=None, alias="floatingIPs")
    flow_logs_collector_debug_trace: bool | None = None
    flow_logs_flush_interval: Duration | None = None
    flow_logs_goldmane_server: str | None = None
    flow_logs_local_reporter: Literal["Disabled", "Enabled"] | None = None
    flow_logs_policy_evaluation_mode: Literal["None", "Continuous"] | None = None
    generic_xdp_enabled: bool | None = Field(default=None, alias="genericXDPEnabled")
    go_gc_threshold: Annotated[int, Field(ge=-1)] | None = Field(
        default=None, alias="goGCThreshold"
    )
    go_max_procs: Annotated[int, Field(ge=-1)] | None = None
    go_memory_limit_mb: Annotated[int, Field(ge=-1)] | None = Field(
        default=None, alias="goMemoryLimitMB"
    )
    health_enabled: bool | None = None
    health_host: str | None = None
    health_port: Port | None = None
    health_timeout_overrides: list[HealthTimeoutOverride] | None = None
    interface_exclude: str | None = None
    interface_prefix: str | None = None
    interface_refresh_interval: Duration | None = None
    ip_forwarding: Literal["Enabled", "Disabled"] | None = None
    ipip_enabled: bool | None = None
    ipip_mtu: Annotated[int, Field(ge=0, le=65535)] | None = Field(default=None, alias="ipipMTU")
    ipsets_refresh_interval: Duration | None = None
    iptables_backend: IptablesBackend | None = None
    iptables_filter_allow_action: AllowAction | None = None
    iptables_filter_deny_action: DenyAction | None = None
    iptables_lock_probe_interval: Duration | None = None
    iptables_mangle_allow_action: AllowAction | None = None
    iptables_mark_mask: Annotated[int, Field(ge=0, le=4294967295)] | None = None
    iptables_nat_outgoing_interface_filter: str | None = Field(
        default=None, alias="iptablesNATOutgoingInterfaceFilter"
    )
    iptables_post_write_check_interval: Duration | None = None
    iptables_refresh_interval: Duration | None = None
    ipv4_elevated_route_priority: Annotated[int, Field(ge=1, le=2147483646)] | None = None
    ipv4_normal_route_priority: Annotated[int, Field(ge=1, le=2147483646)] | None = None
    ipv6_elevated_route_priority: Annotated[int, Field(ge=1, le=2147483646)] | None = None
    ipv6_normal_route_priority: Annotated[int, Field(ge=1, le=2147483646)] | None = None
    ipv6_support: bool | None = None
    istio_ambient_mode: Literal["Enabled", "Disabled"] | None = None
    istio_dscp_mark: Annotated[DSCPValue, WithJsonSchema(INT_OR_STRING)] | None = Field(
        default=None, alias="istioDSCPMark"
    )
    kube_node_port_ranges: Annotated[list[PortRange], Field(max_length=7)] | None = None
    live_migration_route_convergence_time: Duration | None = None
    local_subnet_l2_reachability: Literal["Disabled", "PodsAndLoadBalancers"] | None = None
    local_subnet_l2_reachability_refresh_interval: Duration | None = None
    log_action_rate_limit: RateLimit | None = None
    log_action_rate_limit_burst: Annotated[int, Field(ge=0, le=9999)] | None = None
    log_debug_filename_regex: Regex | None = None
    log_file_path: str | None = None
    log_prefix: LogPrefix | None = None
    log_severity_file: LogSeverity | None = None
    log_severity_screen: LogSeverity | None = None
    log_severity_sys: LogSeverity | None = None
    max_ipset_size: Annotated[int, Field(ge=0)] | None = None
    metadata_addr: str | None = None
    metadata_port: Port | None = None
    mtu_iface_pattern: Regex | None = None
    nat_outgoing_address: IPv4 | None = None
    nat_outgoing_exclusions: Literal["IPPoolsOnly", "IPPoolsAndHostIPs"] | None = None
    nat_port_range: PortRange | None = None
    netlink_timeout: Duration | None = None
    nftables_filter_allow_action: AllowAction | None = None
    nftables_filter_deny_action: DenyAction | None = None
    nftables_mangle_allow_action: AllowAction | None = None
    nftables_mark_mask: Annotated[int, Field(ge=0, le=4294967295)] | None = None
    nftables_mode: Literal["Disabled", "Enabled", "Auto"] | None = None
    nftables_refresh_interval: Duration | None = None
    node_selector: Annotated[Selector, Field(max_length=1024)] | None = None
    openstack_region: OpenstackRegion | None = None
    policy_sync_path_prefix: str | None = None
    program_cluster_routes: ClusterRoutes | None = None
    prometheus_go_metrics_enabled: bool | None = None
    prometheus_metrics_ca_file: str | None = Field(default=None, alias="prometheusMetricsCAFile")
    prometheus_metrics_cert_file: str | None = None
    prometheus_metrics_client_auth: str | None = None
    prometheus_metrics_enabled: bool | None = None
    prometheus_metrics_host: str | None = None
    prometheus_metrics_key_file: str | None = None
    prometheus_metrics_port: Port | None = None
    prometheus_process_metrics_enabled: bool | None = None
    prometheus_wireguard_metrics_enabled: bool | None = Field(
        default=None, alias="prometheusWireGuardMetricsEnabled"
    )
    remove_external_routes: bool | None = None
    reporting_interval: Duration | None = None
    reporting_ttl: Duration | None = Field(default=None, alias="reportingTTL")
    require_mtu_file: bool | None = Field(default=None, alias="requireMTUFile")
    route_refresh_interval: Duration | None = None
    route_source: RouteSource | None = None
    route_sync_disabled: bool | None = None
    route_table_range: RouteTableRange | None = None
    route_table_ranges: list[RouteTableIDRange] | None = None
    service_loop_prevention: LoopPrevention | None = None
    sidecar_acceleration_enabled: bool | None = None
    usage_reporting_enabled: bool | None = None
    usage_reporting_initial_delay: Duration | None = None
    usage_reporting_interval: Duration | None = None
    use_internal_dataplane_driver: bool | None = None
    vxlan_enabled: bool | None = None
    vxlan_mtu: Annotated[int, Field(ge=0, le=65535)] | None = Field(default=None, alias="vxlanMTU")
    vxlan_mtu_v6: Annotated[int, Field(ge=0, le=65535)] | None = Field(
        default=None, alias="vxlanMTUV6"
    )
    vxlan_port: Port | None = None
    vxlan_vni: Annotated[int, Field(ge=0, le=16777215)] | None = Field(
        default=None, alias="vxlanVNI"
    )
    windows_manage_firewall_rules: Literal["Enabled", "Disabled"] | None = None
    wireguard_enabled: bool | None = None
    wireguard_enabled_v6: bool | None = None
    wireguard_host_encryption_enabled: bool | None = None
    wireguard_interface_name: IfaceName | None = None
    wireguard_interface_name_v6: IfaceName | None = None
    wireguard_keep_alive: Duration | None = None
    wireguard_listening_port: Annotated[int, Field(ge=1, le=65535)] | None = None
    wireguard_listening_port_v6: Annotated[int, Field(ge=1, le=65535)] | None = None
    wireguard_mtu: Annotated[int, Field(ge=0, le=65535)] | None = Field(
        default=None, alias="wireguardMTU"
    )
    wireguard_mtu_v6: Annotated[int, Field(ge=0, le=65535)] | None = Field(
        default=None, alias="wireguardMTUV6"
    )
    wireguard_routing_rule_priority: Annotated[int, Field(ge=1, le=32765)] | None = None
    wireguard_threading_enabled: bool | None = None
    workload_source_spoofing: SourceSpoofing | None = None
    xdp_enabled: bool | None = None
    xdp_refresh_interval: Duration | None = None

    @model_validator(mode="after")
    def _cross_checks(self) -> "FelixConfigurationSpec":
        if self.route_table_range is not None and self.route_table_ranges is not None:
            v.raise_at(
                ("routeTableRanges",), "routeTableRange and routeTableRanges cannot both be set"
            )
        return self


_NODE_PREFIX = "node."


@register
class FelixConfiguration(Resource):
    """Named ``default`` (global), ``node.<nodename>`` (one node) or anything with a
    ``spec.nodeSelector`` (the nodes it selects)."""

    KIND: ClassVar[str] = "FelixConfiguration"

    kind: str = "FelixConfiguration"
    spec: FelixConfigurationSpec = Field(default_factory=FelixConfigurationSpec)

    @classmethod
    def name_problem(cls, name: str) -> str | None:
        if name == "default":
            return None
        if name.startswith(_NODE_PREFIX):
            try:
                v.dns1123_subdomain(name[len(_NODE_PREFIX) :], "node name")
            except ValueError as exc:
                return f"FelixConfiguration name {name!r}: {exc}"
            return None
        return super().name_problem(name)

    @model_validator(mode="after")
    def _selector_only_when_scoped(self) -> "FelixConfiguration":
        # Upstream's CRD rule: 'default' and 'node.*' configs are placed by name, never by
        # selector, so a nodeSelector there would be silently meaningless.
        name = self.metadata.name
        placed_by_name = name == "default" or name.startswith(_NODE_PREFIX)
        if placed_by_name and self.spec.node_selector is not None:
            v.raise_at(
                ("spec", "nodeSelector"),
                "nodeSelector must not be set on the 'default' or per-node ('node.*') "
                "FelixConfiguration",
            )
        return self

    def node_name(self) -> str | None:
        """The node a ``node.<nodename>`` config applies to, else None."""
        name = self.metadata.name
        return name[len(_NODE_PREFIX) :] if name.startswith(_NODE_PREFIX) else None
