"""The Felix parameter table: upstream's names, types, defaults and flags.

Flags (as upstream's ``config:"type;default;flags"`` tags):
``local``        only honoured from local sources (env, felix.cfg), never from the datastore;
``non-zero``     ``none`` is refused (the zero value would be meaningless);
``die-on-fail``  an invalid value is a startup error (recorded in ``Config.errors``);
``hot``          applied live: a change does not restart Felix (exit 129);
``raw-default``  the default is used as written, not validated (DataplaneDriver).

Parameters that only matter to other dataplanes (Windows, Istio, most BPF ones) or to Go's
runtime are left out; values for them are kept raw like any unknown name. BPFEnabled and the
BPF map sizes select and size the BPF dataplane (design/felix-bpf.md); the WireGuard switches
are kept so that a request for them is visible (this dataplane does not implement them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from calico.datastore.config import DEFAULT_LOCAL_PATH
from calico.felix.config import netparsers as n
from calico.felix.config import parsers as p

_FLAGS = frozenset({"local", "non-zero", "die-on-fail", "hot", "raw-default"})


@dataclass(frozen=True)
class Param:
    """One parameter: its parser, typed default and flags."""

    name: str
    parser: p.Parser
    default_text: str
    default: Any
    local: bool = False
    non_zero: bool = False
    die_on_fail: bool = False
    hot: bool = False

    @property
    def zero(self) -> Any:
        return self.parser.zero

    def parse(self, raw: str) -> Any:
        return self.parser.parse(raw)


# Parser shorthands, named after upstream's type tags.
BOOL = p.BoolParser()
OPT_BOOL = p.BoolParser(kind="*bool", optional=True)
INT = p.IntParser()
PORT = p.IntParser(lo=0, hi=65535)
SECONDS = p.SecondsParser()
MILLIS = p.SecondsParser(kind="millis", unit=0.001)
STRING = p.PatternParser()
FILE = p.FileParser()
MUST_EXIST = p.FileParser(must_exist=True)
IPV4 = n.IPParser()
IPV6 = n.IPParser(kind="ipv6", version=6)
MARK = p.MarkMaskParser()
ALLOW = p.ChoiceParser(options=("ACCEPT", "RETURN"))
DENY = p.ChoiceParser(options=("DROP", "REJECT"))
ON_OFF = p.ChoiceParser(options=("Enabled", "Disabled"))
SEVERITY = p.ChoiceParser(options=p.LOG_SEVERITIES)
AUTHORITY = p.PatternParser(
    kind="authority", regex=re.compile(r"[^:/]+:\d+"), message="invalid URL authority"
)
HOSTNAME = p.PatternParser(
    kind="hostname", regex=re.compile(r"[a-zA-Z0-9_.-]+"), message="invalid hostname"
)
HOST_ADDRESS = p.PatternParser(
    kind="host-address", regex=re.compile(r"[a-zA-Z0-9:._+-]{1,64}"), message="invalid host address"
)
IFACE_PARAM = p.PatternParser(
    kind="iface-param",
    regex=re.compile(r"[a-zA-Z0-9:._+-]{1,15}"),
    message="invalid Linux interface parameter",
)
IFACE_LIST = p.PatternParser(
    kind="iface-list",
    regex=re.compile(r"[a-zA-Z0-9_-]{1,15}(,[a-zA-Z0-9_-]{1,15})*"),
    message="invalid Linux interface name",
)
LOG_RATE = p.PatternParser(
    kind="log-rate",
    regex=re.compile(r"([1-9]\d{0,3}/(second|minute|hour|day))?"),
    message="invalid log rate limit",
)
REGION = p.PatternParser(
    kind="region",
    regex=re.compile(r"(?=.{1,46}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?"),
    message="must be a DNS label of at most 46 characters",
)


def oneof(*options: str) -> p.ChoiceParser:
    return p.ChoiceParser(options=options)


def _int(lo: int | None = None, hi: int | None = None) -> p.IntParser:
    return p.IntParser(lo=lo, hi=hi)


# (name, parser, default, flags)
_TABLE: tuple[tuple[str, p.Parser, str, str], ...] = (
    # Process, datastore and Typha connection (local-only).
    (
        "DatastoreType",
        oneof("local", "etcdv3", "kubernetes"),
        "local",
        "non-zero,die-on-fail,local",
    ),
    ("FelixHostname", HOSTNAME, "", "local,non-zero"),
    ("CalicoDatastorePath", FILE, DEFAULT_LOCAL_PATH, "local"),
    ("EtcdAddr", AUTHORITY, "127.0.0.1:2379", "local"),
    ("EtcdScheme", oneof("http", "https"), "http", "local"),
    ("EtcdKeyFile", MUST_EXIST, "", "local"),
    ("EtcdCertFile", MUST_EXIST, "", "local"),
    ("EtcdCaFile", MUST_EXIST, "", "local"),
    ("EtcdEndpoints", n.EndpointListParser(), "", "local"),
    ("TyphaAddr", AUTHORITY, "", "local"),
    ("TyphaK8sServiceName", STRING, "", "local"),
    ("TyphaK8sNamespace", STRING, "kube-system", "non-zero,local"),
    ("TyphaReadTimeout", SECONDS, "30", "local"),
    ("TyphaWriteTimeout", SECONDS, "10", "local"),
    ("TyphaKeyFile", MUST_EXIST, "", "local"),
    ("TyphaCertFile", MUST_EXIST, "", "local"),
    ("TyphaCAFile", MUST_EXIST, "", "local"),
    ("TyphaCN", STRING, "", "local"),
    ("TyphaURISAN", STRING, "", "local"),
    ("UseInternalDataplaneDriver", BOOL, "true", ""),
    (
        "DataplaneDriver",
        p.FileParser(must_exist=True, executable=True),
        "calico-iptables-plugin",
        "non-zero,die-on-fail,raw-default",
    ),
    ("DataplaneWatchdogTimeout", SECONDS, "90", ""),
    # Logging.
    ("LogFilePath", FILE, "/var/log/calico/felix.log", "die-on-fail"),
    ("LogSeverityFile", SEVERITY, "INFO", ""),
    ("LogSeverityScreen", SEVERITY, "INFO", ""),
    ("LogSeveritySys", SEVERITY, "INFO", ""),
    ("LogDebugFilenameRegex", p.RegexParser(nil_on_empty=True), "", ""),
    ("LogPrefix", STRING, "calico-packet", ""),
    ("LogActionRateLimit", LOG_RATE, "", ""),
    ("LogActionRateLimitBurst", _int(0, 9999), "5", ""),
    # Health, metrics, status reporting.
    ("HealthEnabled", BOOL, "false", ""),
    ("HealthHost", HOST_ADDRESS, "localhost", ""),
    ("HealthPort", PORT, "9099", ""),
    ("HealthTimeoutOverrides", p.KeyDurationListParser(), "", "hot"),
    ("PrometheusMetricsEnabled", BOOL, "false", ""),
    ("PrometheusMetricsHost", HOST_ADDRESS, "", ""),
    ("PrometheusMetricsPort", PORT, "9091", ""),
    ("PrometheusGoMetricsEnabled", BOOL, "true", ""),
    ("PrometheusProcessMetricsEnabled", BOOL, "true", ""),
    ("PrometheusWireGuardMetricsEnabled", BOOL, "true", ""),
    ("PrometheusMetricsCAFile", STRING, "", ""),
    ("PrometheusMetricsCertFile", STRING, "", ""),
    ("PrometheusMetricsKeyFile", STRING, "", ""),
    (
        "PrometheusMetricsClientAuth",
        oneof(
            "RequireAndVerifyClientCert",
            "RequireAnyClientCert",
            "VerifyClientCertIfGiven",
            "NoClientCert",
        ),
        "NoClientCert",
        "",
    ),
    ("ReportingIntervalSecs", SECONDS, "30", ""),
    ("ReportingTTLSecs", SECONDS, "90", ""),
    ("EndpointReportingEnabled", BOOL, "false", ""),
    ("EndpointReportingDelaySecs", SECONDS, "1", ""),
    ("EndpointStatusPathPrefix", FILE, "/var/run/calico", ""),
    ("UsageReportingEnabled", BOOL, "true", ""),
    ("UsageReportingInitialDelaySecs", SECONDS, "300", ""),
    ("UsageReportingIntervalSecs", SECONDS, "86400", ""),
    # Cluster information (from ClusterInformation; applied live).
    ("ClusterGUID", STRING, "baddecaf", "hot"),
    ("ClusterType", STRING, "", "hot"),
    ("CalicoVersion", STRING, "", "hot"),
    ("Variant", STRING, "Calico", ""),
    # Rule rendering: nftables (this dataplane) and the iptables twins it accepts.
    ("NFTablesMode", oneof("Enabled", "Disabled", "Auto"), "Auto", ""),
    ("NftablesRefreshInterval", SECONDS, "180", ""),
    ("NftablesFilterAllowAction", ALLOW, "ACCEPT", "non-zero,die-on-fail"),
    ("NftablesMangleAllowAction", ALLOW, "ACCEPT", "non-zero,die-on-fail"),
    ("NftablesFilterDenyAction", DENY, "DROP", "non-zero,die-on-fail"),
    ("NftablesMarkMask", MARK, "0xffff0000", "non-zero,die-on-fail"),
    ("IptablesBackend", oneof("legacy", "nft", "auto"), "auto", ""),
    ("IptablesRefreshInterval", SECONDS, "180", ""),
    ("IptablesPostWriteCheckIntervalSecs", SECONDS, "5", ""),
    ("IptablesLockProbeIntervalMillis", MILLIS, "50", ""),
    ("IptablesFilterAllowAction", ALLOW, "ACCEPT", "non-zero,die-on-fail"),
    ("IptablesMangleAllowAction", ALLOW, "ACCEPT", "non-zero,die-on-fail"),
    ("IptablesFilterDenyAction", DENY, "DROP", "non-zero,die-on-fail"),
    ("IptablesMarkMask", MARK, "0xffff0000", "non-zero,die-on-fail"),
    ("IptablesNATOutgoingInterfaceFilter", IFACE_PARAM, "", ""),
    ("ChainInsertMode", oneof("insert", "append"), "insert", "non-zero,die-on-fail"),
    (
        "DefaultEndpointToHostAction",
        oneof("DROP", "RETURN", "ACCEPT"),
        "DROP",
        "non-zero,die-on-fail",
    ),
    (
        "FailsafeInboundHostPorts",
        n.PortListParser(),
        "tcp:22,udp:68,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667",
        "die-on-fail",
    ),
    (
        "FailsafeOutboundHostPorts",
        n.PortListParser(),
        "udp:53,udp:67,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667",
        "die-on-fail",
    ),
    ("DisableConntrackInvalidCheck", BOOL, "false", ""),
    ("IpsetsRefreshInterval", SECONDS, "90", ""),
    ("MaxIpsetSize", INT, "1048576", "non-zero"),
    ("ServiceLoopPrevention", oneof("Drop", "Reject", "Disabled"), "Drop", ""),
    ("WorkloadSourceSpoofing", oneof("Disabled", "Any"), "Disabled", ""),
    ("AllowVXLANPacketsFromWorkloads", BOOL, "false", ""),
    ("AllowIPIPPacketsFromWorkloads", BOOL, "false", ""),
    ("KubeNodePortRanges", n.PortRangeListParser(), "30000:32767", ""),
    ("NATPortRange", n.PortRangeParser(), "", ""),
    ("NATOutgoingAddress", IPV4, "", ""),
    ("NATOutgoingExclusions", oneof("IPPoolsOnly", "IPPoolsAndHostIPs"), "IPPoolsOnly", ""),
    ("ExternalNodesCIDRList", n.CIDRListParser(), "", "die-on-fail"),
    ("FloatingIPs", ON_OFF, "Disabled", ""),
    ("MetadataAddr", HOSTNAME, "127.0.0.1", "die-on-fail"),
    ("MetadataPort", PORT, "8775", "die-on-fail"),
    ("OpenstackRegion", REGION, "", "die-on-fail"),
    ("XDPEnabled", BOOL, "true", ""),
    ("XDPRefreshInterval", SECONDS, "90", ""),
    ("GenericXDPEnabled", BOOL, "false", ""),
    ("SidecarAccelerationEnabled", BOOL, "false", ""),
    ("PolicySyncPathPrefix", FILE, "", ""),
    ("FeatureDetectOverride", p.KeyValueListParser(), "", ""),
    ("FeatureGates", p.KeyValueListParser(), "", ""),
    ("BPFEnabled", BOOL, "false", ""),
    ("BPFMapSizeConntrack", INT, "512000", ""),
    ("BPFMapSizeIPSets", INT, "1048576", ""),
    ("BPFMapSizeIfState", INT, "1000", ""),
    ("BPFMapSizeRoute", INT, "262144", ""),
    ("BPFLogLevel", oneof("Off", "Info", "Debug"), "Off", ""),
    ("BPFPolicyDebugEnabled", BOOL, "true", ""),
    # Netkit (upstream's default) = TCX here: there are no netkit devices; TC = tc clsact.
    ("BPFAttachType", oneof("Netkit", "TCX", "TC"), "Netkit", ""),
    # Reverse-path filtering of new flows arriving on data interfaces (upstream's values).
    ("BPFEnforceRPF", oneof("Disabled", "Strict", "Loose"), "Loose", ""),
    # calico-py only (upstream hard-codes the directory): where BPFPolicyDebugEnabled writes
    # the policy listings, so that Felixes under test keep theirs apart.
    ("BPFPolicyDebugDir", FILE, "/var/run/calico/bpf/policy", ""),
    # Host interfaces that get the host endpoint programs (upstream's default).
    (
        "BPFDataIfacePattern",
        p.RegexParser(),
        r"^((en|wl|ww|sl|ib)[Popsx].*|(eth|wlan|wwan|bond).*)",
        "",
    ),
    (
        "BPFConntrackTimeouts",
        p.KeyValueListParser(),
        "CreationGracePeriod=10s,TCPSynSent=20s,TCPEstablished=1h,TCPFinsSeen=Auto,"
        "TCPResetSeen=40s,UDPTimeout=60s,GenericTimeout=10m,ICMPTimeout=5s",
        "",
    ),
    ("AWSSrcDstCheck", oneof("DoNothing", "Enable", "Disable"), "DoNothing", "non-zero"),
    # Interfaces, routes, forwarding.
    ("InterfacePrefix", IFACE_LIST, "cali", "non-zero,die-on-fail"),
    ("InterfaceExclude", n.IfaceRegexListParser(), "kube-ipvs0", ""),
    ("InterfaceRefreshInterval", SECONDS, "90", ""),
    ("Ipv6Support", BOOL, "true", ""),
    ("IPForwarding", ON_OFF, "Enabled", ""),
    ("RouteRefreshInterval", SECONDS, "90", ""),
    ("RouteTableRange", n.RouteTableRangeParser(), "", "die-on-fail"),
    ("RouteTableRanges", n.RouteTableRangesParser(), "", "die-on-fail"),
    ("RouteSyncDisabled", BOOL, "false", ""),
    ("RouteSource", oneof("WorkloadIPs", "CalicoIPAM"), "CalicoIPAM", ""),
    ("RemoveExternalRoutes", BOOL, "true", ""),
    ("ProgramClusterRoutes", ON_OFF, "Disabled", ""),
    ("DeviceRouteSourceAddress", IPV4, "", ""),
    ("DeviceRouteSourceAddressIPv6", IPV6, "", ""),
    ("DeviceRouteProtocol", INT, "3", ""),
    ("IPv4NormalRoutePriority", _int(1, 2147483646), "1024", ""),
    ("IPv4ElevatedRoutePriority", _int(1, 2147483646), "512", ""),
    ("IPv6NormalRoutePriority", _int(1, 2147483646), "1024", ""),
    ("IPv6ElevatedRoutePriority", _int(1, 2147483646), "512", ""),
    ("LiveMigrationRouteConvergenceTime", SECONDS, "30", ""),
    ("NetlinkTimeoutSecs", SECONDS, "10", ""),
    ("MTUIfacePattern", p.RegexParser(), r"^((en|wl|ww|sl|ib)[Pcopsvx].*|(eth|wlan|wwan).*)", ""),
    ("RequireMTUFile", BOOL, "false", ""),
    # Where the pod MTU is written for the CNI plugin (upstream hard-codes the default; a
    # parameter here so several nodes on one machine can each have their own file).
    ("MTUFilePath", FILE, "/var/lib/calico/mtu", ""),
    # Encapsulation (IPIP / VXLAN); *bool: unset means "derive from IP pools".
    ("IpInIpEnabled", OPT_BOOL, "", ""),
    ("IpInIpMtu", INT, "0", ""),
    ("IpInIpTunnelAddr", IPV4, "", ""),
    ("VXLANEnabled", OPT_BOOL, "", ""),
    ("VXLANPort", INT, "4789", ""),
    ("VXLANVNI", INT, "4096", ""),
    ("VXLANMTU", INT, "0", ""),
    ("VXLANMTUV6", INT, "0", ""),
    ("IPv4VXLANTunnelAddr", IPV4, "", ""),
    ("IPv6VXLANTunnelAddr", IPV6, "", ""),
    ("VXLANTunnelMACAddr", STRING, "", ""),
    ("VXLANTunnelMACAddrV6", STRING, "", ""),
    # WireGuard (recorded; not implemented by this dataplane).
    ("WireguardEnabled", BOOL, "false", ""),
    ("WireguardEnabledV6", BOOL, "false", ""),
    ("WireguardListeningPort", INT, "51820", ""),
    ("WireguardListeningPortV6", INT, "51821", ""),
    ("WireguardRoutingRulePriority", INT, "99", ""),
    ("WireguardInterfaceName", IFACE_PARAM, "wireguard.cali", "non-zero"),
    ("WireguardInterfaceNameV6", IFACE_PARAM, "wg-v6.cali", "non-zero"),
    ("WireguardMTU", INT, "0", ""),
    ("WireguardMTUV6", INT, "0", ""),
    ("WireguardHostEncryptionEnabled", BOOL, "false", ""),
    ("WireguardPersistentKeepAlive", SECONDS, "0", ""),
    ("WireguardThreadingEnabled", BOOL, "false", ""),
    # Flow logs.
    ("FlowLogsFlushInterval", SECONDS, "300", ""),
    ("FlowLogsCollectorDebugTrace", BOOL, "false", ""),
    ("FlowLogsGoldmaneServer", STRING, "", ""),
    ("FlowLogsLocalReporter", ON_OFF, "Disabled", ""),
    ("FlowLogsPolicyEvaluationMode", oneof("None", "Continuous"), "Continuous", ""),
    # Debugging.
    ("DebugMemoryProfilePath", FILE, "", ""),
    ("DebugDisableLogDropping", BOOL, "false", ""),
    ("DebugHost", HOST_ADDRESS, "localhost", ""),
    ("DebugPort", PORT, "", ""),
    ("DebugSimulateCalcGraphHangAfter", SECONDS, "0", ""),
    ("DebugSimulateDataplaneHangAfter", SECONDS, "0", ""),
    ("DebugSimulateDataplaneApplyDelay", SECONDS, "0", ""),
    ("DebugPanicAfter", SECONDS, "0", ""),
)


def _build(name: str, parser: p.Parser, default_text: str, flags: str) -> Param:
    flag_set = frozenset(f for f in flags.split(",") if f)
    if unknown := flag_set - _FLAGS:
        raise ValueError(f"{name}: unknown flags {sorted(unknown)}")
    if not default_text:
        default = parser.zero
    elif "raw-default" in flag_set:
        default = default_text
    else:
        default = parser.parse(default_text)  # validates the table itself at import
    return Param(
        name=name,
        parser=parser,
        default_text=default_text,
        default=default,
        local="local" in flag_set,
        non_zero="non-zero" in flag_set,
        die_on_fail="die-on-fail" in flag_set,
        hot="hot" in flag_set,
    )


#: Every known parameter by canonical name (table order).
PARAMS: dict[str, Param] = {row[0]: _build(*row) for row in _TABLE}
#: Lower-cased name -> Param: Felix matches parameter names case-insensitively.
BY_LOWER: dict[str, Param] = {name.lower(): param for name, param in PARAMS.items()}
LOCAL_ONLY = frozenset(name for name, param in PARAMS.items() if param.local)
#: Parameters applied without a restart (upstream: cluster information + health overrides).
HOT_RELOADABLE = frozenset(name for name, param in PARAMS.items() if param.hot)


def lookup(name: str) -> Param | None:
    """The parameter for a name in any case (``healthport``, ``HEALTHPORT``), or None."""
    return BY_LOWER.get(name.lower())
