"""FelixConfiguration fields, rendered to v1 strings by the model processors, resolve cleanly."""

from __future__ import annotations

import ipaddress

from calico.api.felixconfig import FelixConfigurationSpec
from calico.felix.config import Source, lookup, resolve
from calico.felix.config.netparsers import IndexRange, PortRange, ProtoPort
from calico.model.processors.confignames import SPEC_FIELDS, param_name, render

SPEC = {
    "logSeverityScreen": "Debug",
    "defaultEndpointToHostAction": "Accept",
    "reportingInterval": "1m30s",
    "iptablesLockProbeInterval": "100ms",
    "failsafeInboundHostPorts": [{"protocol": "TCP", "port": 22}, "udp:10.0.0.0/8:68"],
    "failsafeOutboundHostPorts": [],
    "routeTableRange": {"min": 10, "max": 20},
    "healthTimeoutOverrides": [{"name": "CalculationGraph", "timeout": "45s"}],
    "ipipEnabled": True,
    "ipipMTU": 1440,
    "vxlanVNI": 4097,
    "nftablesMarkMask": 0xFF000000,
    "natPortRange": "32768:65535",
    "kubeNodePortRanges": [30000, "31000:32000"],
    "interfaceExclude": "kube-ipvs0,/^veth/",
    "ipv4NormalRoutePriority": 100,
    "nftablesMode": "Enabled",
    "workloadSourceSpoofing": "Any",
    "natOutgoingAddress": "192.0.2.1",
    "healthEnabled": True,
    "metadataPort": 0,
    "bpfEnabled": False,
    "bpfLogLevel": "Debug",
    "bpfConntrackLogLevel": "Debug",
}


def rendered(spec: dict) -> dict[str, str]:
    model = FelixConfigurationSpec.model_validate(spec)
    out = {}
    for attr, json_name in SPEC_FIELDS:
        value = getattr(model, attr)
        if value is not None and (text := render(json_name, value)) is not None:
            out[param_name(json_name)] = text
    return out


def test_rendered_spec_resolves_without_errors() -> None:
    raw = rendered(SPEC)
    c = resolve({Source.DATASTORE_GLOBAL: raw}, hostname="h")
    assert c.invalid == {} and c.errors == []
    assert c.unknown == {"BPFConntrackLogLevel": "Debug"}  # a BPF parameter Felix lacks
    assert c["BPFLogLevel"] == "Debug"
    assert c.log_severity_screen == "DEBUG"
    assert c.default_endpoint_to_host_action == "ACCEPT"
    assert c.reporting_interval_secs == 90.0
    assert c.iptables_lock_probe_interval_millis == 0.1
    assert c.failsafe_inbound_host_ports == (
        ProtoPort("tcp", 22),
        ProtoPort("udp", 68, "10.0.0.0/8"),
    )
    assert c.failsafe_outbound_host_ports == ()
    assert c.route_table_range == IndexRange(10, 20)
    assert c.health_timeout_overrides == {"CalculationGraph": 45.0}
    assert (c.ip_in_ip_enabled, c.ip_in_ip_mtu, c.vxlan_vni) == (True, 1440, 4097)
    assert c.nftables_mark_mask == 0xFF000000
    assert c.nat_port_range == PortRange(32768, 65535)
    assert c.kube_node_port_ranges == (PortRange(30000, 30000), PortRange(31000, 32000))
    assert c.ipv4_normal_route_priority == 100
    assert c.nftables_mode == "Enabled"
    assert c.workload_source_spoofing == "Any"
    assert c.nat_outgoing_address == ipaddress.IPv4Address("192.0.2.1")
    assert c.health_enabled is True and c.metadata_port == 0 and c.bpf_enabled is False
    for name in raw:
        if lookup(name) is not None:
            assert c.source(name) is Source.DATASTORE_GLOBAL, name
