"""Felix parameter names of FelixConfiguration fields, and Go's float printing, without the
model: shared by ``confignames`` (the processor's rendering of the model's fields) and
``leanfelixconfig`` (the same for a plain stored document read without pydantic). The naming
rule and its exceptions are described in ``confignames``.
"""

from __future__ import annotations

NAME_EXCEPTIONS = {
    "awsSrcDstCheck": "AWSSrcDstCheck",
    "bpfConntrackMode": "BPFConntrackCleanupMode",
    "bpfMapSizePerCpuConntrack": "BPFMapSizePerCPUConntrack",
    "endpointReportingDelay": "EndpointReportingDelaySecs",
    "externalNodesList": "ExternalNodesCIDRList",
    "ipForwarding": "IPForwarding",
    "ipipEnabled": "IpInIpEnabled",
    "ipipMTU": "IpInIpMtu",
    "iptablesLockProbeInterval": "IptablesLockProbeIntervalMillis",
    "iptablesLockTimeout": "IptablesLockTimeoutSecs",
    "iptablesPostWriteCheckInterval": "IptablesPostWriteCheckIntervalSecs",
    "mtuIfacePattern": "MTUIfacePattern",
    "netlinkTimeout": "NetlinkTimeoutSecs",
    "nftablesMode": "NFTablesMode",
    "reportingInterval": "ReportingIntervalSecs",
    "reportingTTL": "ReportingTTLSecs",
    "usageReportingInitialDelay": "UsageReportingInitialDelaySecs",
    "usageReportingInterval": "UsageReportingIntervalSecs",
    "wireguardKeepAlive": "WireguardPersistentKeepAlive",
}
_ACRONYM_PREFIXES = (("bpf", "BPF"), ("vxlan", "VXLAN"), ("xdp", "XDP"), ("nat", "NAT"))
MILLISECOND_FIELDS = frozenset({"iptablesLockProbeInterval"})
#: Fields that select which nodes a config applies to; not Felix parameters.
NOT_PARAMETERS = frozenset({"nodeSelector"})


def param_name(json_name: str) -> str:
    """The Felix parameter a FelixConfiguration JSON field sets."""
    if json_name in NAME_EXCEPTIONS:
        return NAME_EXCEPTIONS[json_name]
    for low, up in _ACRONYM_PREFIXES:
        rest = json_name[len(low) :]
        if json_name.startswith(low) and rest[:1].isupper():
            return up + rest
    return json_name[:1].upper() + json_name[1:]


def go_float(value: float) -> str:
    """A float64 the way Go's ``%v`` prints it (``90``, ``0.05``)."""
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value)
