"""FelixConfiguration: typed fields, names, failsafe ports, ranges and round trips."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from calico.api.base import resource_class
from calico.api.felixconfig import FelixConfiguration, FelixConfigurationSpec, ProtoPort


def errors(d: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as info:
        FelixConfiguration.model_validate(d)
    return [
        (".".join(str(p) for p in e["loc"]), e["msg"].removeprefix("Value error, "))
        for e in info.value.errors()
    ]


def fc(spec: dict[str, Any], name: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": "FelixConfiguration",
        "metadata": {"name": name},
        "spec": spec,
    }


EXAMPLE = """
apiVersion: projectcalico.org/v3
kind: FelixConfiguration
metadata:
  name: default
spec:
  ipv6Support: false
  ipipMTU: 1400
  chainInsertMode: Append
  bpfEnabled: true
  bpfExternalServiceMode: DSR
  logSeverityScreen: Info
  reportingInterval: 0s
  routeRefreshInterval: 1m30s
  vxlanMTUV6: 1430
  vxlanVNI: 4096
  failsafeInboundHostPorts:
    - protocol: tcp
      port: 22
    - protocol: udp
      port: 68
    - protocol: tcp
      net: 10.0.0.0/8
      port: 179
  failsafeOutboundHostPorts:
    - protocol: udp
      port: 53
  kubeNodePortRanges:
    - 30000:32767
    - 8080
  natPortRange: 32768:65000
  healthTimeoutOverrides:
    - name: InternalDataplaneMainLoop
      timeout: 30s
  routeTableRanges:
    - min: 1
      max: 250
  wireguardEnabled: true
  wireguardListeningPort: 51820
  nftablesMode: Enabled
  bpfConntrackTimeouts:
    tcpEstablished: 1h
    udpTimeout: Auto
"""


def test_example_round_trips() -> None:
    f = FelixConfiguration.model_validate(yaml.safe_load(EXAMPLE))
    s = f.spec
    assert s.ipip_mtu == 1400 and s.vxlan_mtu_v6 == 1430 and s.bpf_enabled is True
    assert s.failsafe_inbound_host_ports is not None
    assert s.failsafe_inbound_host_ports[2] == ProtoPort(protocol="tcp", port=179, net="10.0.0.0/8")
    wire = f.to_wire()
    assert wire["spec"]["ipipMTU"] == 1400
    assert wire["spec"]["kubeNodePortRanges"] == ["30000:32767", 8080]
    assert wire["spec"]["routeRefreshInterval"] == "1m30s"
    assert FelixConfiguration.model_validate(wire) == f
    assert "bpfLogLevel" not in wire["spec"]  # unset fields stay unset


def test_every_field_has_an_upstream_wire_name() -> None:
    names = {f.alias or k for k, f in FelixConfigurationSpec.model_fields.items()}
    for expected in (
        "bpfEnabled",
        "ipipMTU",
        "vxlanMTU",
        "vxlanMTUV6",
        "bpfPSNATPorts",
        "bpfDSROptoutCIDRs",
        "deviceRouteSourceAddressIPv6",
        "floatingIPs",
        "prometheusWireGuardMetricsEnabled",
        "reportingTTL",
        "bpfCTLBLogFilter",
        "iptablesNATOutgoingInterfaceFilter",
        "wireguardMTUV6",
    ):
        assert expected in names
    assert len(names) > 170


def test_names_and_aliases() -> None:
    for alias in ("felixconfiguration", "felixconfigurations", "felixconfig", "felixconfigs"):
        assert resource_class(alias) is FelixConfiguration
    f = FelixConfiguration.model_validate(fc({}, "node.worker-1"))
    assert f.node_name() == "worker-1"
    FelixConfiguration.model_validate(fc({"nodeSelector": "role == 'edge'"}, "edge-nodes"))
    # Any name is accepted, as upstream (without a nodeSelector it applies to no node).
    assert FelixConfiguration.model_validate(fc({}, "edge-nodes")).node_name() is None
    [(loc, msg)] = errors(fc({}, "node.Bad_Node"))
    assert loc == "metadata.name"
    assert msg.startswith("FelixConfiguration name 'node.Bad_Node': node name 'Bad_Node' must be")


def test_proto_port_shorthand() -> None:
    assert ProtoPort.parse("tcp:22") == ProtoPort(protocol="tcp", port=22)
    assert ProtoPort.parse("udp:10.0.0.0/8:68").net == "10.0.0.0/8"
    assert ProtoPort.parse("tcp:[fd00::/8]:22").net == "fd00::/8"
    assert ProtoPort.parse("6443") == ProtoPort(protocol="tcp", port=6443)
    f = FelixConfiguration.model_validate(fc({"failsafeInboundHostPorts": ["tcp:22", "udp:68"]}))
    assert f.to_wire()["spec"]["failsafeInboundHostPorts"] == [
        {"protocol": "tcp", "port": 22},
        {"protocol": "udp", "port": 68},
    ]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"reportingInterval": "30"}, ("spec.reportingInterval", 'missing unit in duration "30"')),
        (
            {"routeRefreshInterval": "soon"},
            ("spec.routeRefreshInterval", 'invalid duration "soon"'),
        ),
        (
            {"bpfEnabled": "maybe"},
            ("spec.bpfEnabled", "Input should be a valid boolean, unable to interpret input"),
        ),
        ({"healthPort": 70000}, ("spec.healthPort", "Input should be less than or equal to 65535")),
        (
            {"wireguardListeningPort": 0},
            ("spec.wireguardListeningPort", "Input should be greater than or equal to 1"),
        ),
        (
            {"bpfMaglevMaxServices": 3001},
            ("spec.bpfMaglevMaxServices", "Input should be less than or equal to 3000"),
        ),
        (
            {"logSeverityScreen": "Loud"},
            (
                "spec.logSeverityScreen",
                "'Loud' is not a log level; expected one of "
                "Trace, Debug, Info, Warning, Error, Fatal",
            ),
        ),
        (
            {"defaultEndpointToHostAction": "Allow"},
            (
                "spec.defaultEndpointToHostAction",
                "'Allow' is not one of Drop, Accept, Return (case-insensitive)",
            ),
        ),
        (
            {"nftablesMode": "On"},
            ("spec.nftablesMode", "Input should be 'Disabled', 'Enabled' or 'Auto'"),
        ),
        (
            {"failsafeInboundHostPorts": [{"protocol": "icmp", "port": 1}]},
            (
                "spec.failsafeInboundHostPorts.0.protocol",
                "protocol 'icmp' must be one of TCP, UDP, SCTP",
            ),
        ),
        (
            {"failsafeInboundHostPorts": ["tcp:ssh"]},
            (
                "spec.failsafeInboundHostPorts.0",
                "'tcp:ssh' is not of the form [protocol:][net:]port, "
                "e.g. tcp:22 or tcp:10.0.0.0/8:22",
            ),
        ),
        (
            {"natPortRange": "200:100"},
            ("spec.natPortRange", "port range '200:100': the minimum is greater than the maximum"),
        ),
        (
            {"natOutgoingAddress": "fd00::1"},
            ("spec.natOutgoingAddress", "'fd00::1' is not an IPv4 address"),
        ),
        (
            {"deviceRouteSourceAddressIPv6": "10.0.0.1"},
            ("spec.deviceRouteSourceAddressIPv6", "'10.0.0.1' is not an IPv6 address"),
        ),
        (
            {"routeTableRange": {"min": 0, "max": 250}},
            ("spec.routeTableRange", "must be a range of route table indices within 1..250"),
        ),
        (
            {"routeTableRanges": [{"min": 200, "max": 100}]},
            ("spec.routeTableRanges.0.min", "min must not be greater than max"),
        ),
        (
            {"routeTableRange": {"min": 1, "max": 250}, "routeTableRanges": [{"min": 1, "max": 2}]},
            ("spec.routeTableRanges", "routeTableRange and routeTableRanges cannot both be set"),
        ),
        (
            {"logActionRateLimit": "10/week"},
            ("spec.logActionRateLimit", "'10/week' must be of the form N/second|minute|hour|day"),
        ),
        (
            {"featureDetectOverride": "SNATFullyRandom=yes"},
            (
                "spec.featureDetectOverride",
                "'SNATFullyRandom=yes' must be a comma-separated list of "
                "Feature=true|false|<empty>",
            ),
        ),
        (
            {"bpfDataIfacePattern": "^(eth"},
            (
                "spec.bpfDataIfacePattern",
                "'^(eth' is not a valid regular expression: missing ), unterminated subpattern at "
                "position 1",
            ),
        ),
        ({"ipv6Suport": True}, ("spec.ipv6Suport", "Extra inputs are not permitted")),
    ],
)
def test_invalid_values(spec: dict[str, Any], expected: tuple[str, str]) -> None:
    assert errors(fc(spec)) == [expected]


def test_case_insensitive_enums_are_kept_as_written() -> None:
    f = FelixConfiguration.model_validate(fc({"iptablesBackend": "nft", "bpfLogLevel": "debug"}))
    assert f.to_wire()["spec"] == {"iptablesBackend": "nft", "bpfLogLevel": "debug"}
