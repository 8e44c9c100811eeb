"""BGPConfiguration, BGPPeer and BGPFilter: upstream examples, rule violations, ASN parsing."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from calico.api import validators
from calico.api.base import Resource, resource_class
from calico.api.bgp import BGPConfiguration, BGPFilter, BGPPeer


def errors(cls: type[Resource], doc: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as info:
        cls.model_validate(doc)
    return [
        (".".join(str(p) for p in e["loc"]), e["msg"].removeprefix("Value error, "))
        for e in info.value.errors()
    ]


def doc(kind: str, spec: dict[str, Any], name: str = "x") -> dict[str, Any]:
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


BGP_CONFIG = """
apiVersion: projectcalico.org/v3
kind: BGPConfiguration
metadata:
  name: default
spec:
  logSeverityScreen: Info
  nodeToNodeMeshEnabled: true
  nodeMeshMaxRestartTime: 120s
  asNumber: 63400
  serviceClusterIPs:
    - cidr: 10.96.0.0/12
  serviceExternalIPs:
    - cidr: 104.244.42.129/32
    - cidr: 172.217.3.0/24
  listenPort: 178
  bindMode: NodeIP
  communities:
    - name: bgp-large-community
      value: 63400:300:100
  prefixAdvertisements:
    - cidr: 172.218.4.0/26
      communities:
        - bgp-large-community
        - 63400:120
"""


def test_bgp_configuration_example_round_trips() -> None:
    c = BGPConfiguration.model_validate(yaml.safe_load(BGP_CONFIG))
    assert c.spec.as_number == 63400 and c.spec.listen_port == 178
    wire = c.to_wire()
    assert wire["spec"]["serviceClusterIPs"] == [{"cidr": "10.96.0.0/12"}]
    assert wire["spec"]["nodeMeshMaxRestartTime"] == "2m0s"  # Go prints metav1.Duration canonically
    assert BGPConfiguration.model_validate(wire) == c
    assert resource_class("bgpconfig") is BGPConfiguration


def test_unquoted_dotted_as_number_is_rejected() -> None:
    bad = yaml.safe_load(
        "kind: BGPConfiguration\nmetadata: {name: default}\nspec: {asNumber: 1.10}"
    )
    assert errors(BGPConfiguration, bad) == [
        (
            "spec.asNumber",
            "AS number 1.1 was given as a decimal number; quote dotted AS numbers, "
            'e.g. asNumber: "1.10"',
        )
    ]


def test_dotted_as_number() -> None:
    c = BGPConfiguration.model_validate(doc("BGPConfiguration", {"asNumber": "1.10"}, "default"))
    assert c.spec.as_number == 65546
    assert c.to_wire()["spec"]["asNumber"] == 65546


@pytest.mark.parametrize(
    ("spec", "name", "expected"),
    [
        (
            {"asNumber": "1.65536"},
            "default",
            ("spec.asNumber", "'1.65536' is not a valid AS number: each half must be <= 65535"),
        ),
        ({"asNumber": "as1"}, "default", ("spec.asNumber", "'as1' is not a valid AS number")),
        (
            {"asNumber": 4294967296},
            "default",
            ("spec.asNumber", "AS number 4294967296 is out of range 0-4294967295"),
        ),
        (
            {"logSeverityScreen": "Verbose"},
            "default",
            (
                "spec.logSeverityScreen",
                "'Verbose' is not a log level; expected one of Trace, Debug, Info, Warning, Error, "
                "Fatal",
            ),
        ),
        (
            {"listenPort": 0},
            "default",
            ("spec.listenPort", "Input should be greater than or equal to 1"),
        ),
        (
            {"serviceClusterIPs": [{"cidr": "10.96.0.0/33"}]},
            "default",
            ("spec.serviceClusterIPs.0.cidr", "'10.96.0.0/33' is not a valid CIDR"),
        ),
        (
            {"communities": [{"name": "c", "value": "70000:1"}]},
            "default",
            (
                "spec.communities.0.value",
                "standard community value '70000:1': each part must be a 16-bit number",
            ),
        ),
        (
            {"prefixAdvertisements": [{"cidr": "10.0.0.0/8", "communities": ["undefined"]}]},
            "default",
            (
                "spec.prefixAdvertisements.0.communities.0",
                "community 'undefined' is neither defined in spec.communities nor a value of the "
                "form aa:nn or aa:nn:mm",
            ),
        ),
        (
            {"nodeToNodeMeshEnabled": False, "nodeMeshMaxRestartTime": "10s"},
            "default",
            (
                "spec.nodeMeshMaxRestartTime",
                "nodeMeshMaxRestartTime cannot be set when nodeToNodeMeshEnabled is false",
            ),
        ),
        (
            {"nodeMeshPassword": {"secretKeyRef": {"name": "s", "key": "k"}}},
            "node.node-1",
            (
                "spec.nodeMeshPassword",
                "Cannot set nodeMeshPassword on a non default BGP Configuration.",
            ),
        ),
        (
            {"nodeMeshMaxRestartTime": "2 minutes"},
            "default",
            ("spec.nodeMeshMaxRestartTime", 'invalid duration "2 minutes"'),
        ),
        ({"bindMode": "All"}, "default", ("spec.bindMode", "Input should be 'None' or 'NodeIP'")),
    ],
)
def test_invalid_bgp_configurations(
    spec: dict[str, Any], name: str, expected: tuple[str, str]
) -> None:
    assert errors(BGPConfiguration, doc("BGPConfiguration", spec, name)) == [expected]


PEERS = """
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata:
  name: some.name
spec:
  node: rack1-host1
  peerIP: 192.168.1.1
  asNumber: 63400
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata:
  name: rr-peers
spec:
  nodeSelector: "!has(route-reflector)"
  peerSelector: has(route-reflector)
  filters:
    - my-filter
  password:
    secretKeyRef:
      name: bgp-secrets
      key: rr-password
  maxRestartTime: 2m
  keepaliveTime: 10s
  nextHopMode: Self
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata:
  name: v6-peer
spec:
  peerIP: "[fd00::1]:1790"
  asNumber: "1.10"
  sourceAddress: None
  ttlSecurity: 2
  reachableBy: fd00::254
"""


def test_peer_examples_round_trip() -> None:
    peers = [BGPPeer.model_validate(d) for d in yaml.safe_load_all(PEERS)]
    assert peers[0].spec.peer_ip == "192.168.1.1"
    assert peers[1].to_wire()["spec"]["password"] == {
        "secretKeyRef": {"key": "rr-password", "name": "bgp-secrets"}
    }
    assert peers[2].spec.as_number == 65546
    for p in peers:
        assert BGPPeer.model_validate(p.to_wire()) == p
    for alias in ("bgppeer", "bgpp", "bps"):
        assert resource_class(alias) is BGPPeer


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"peerIP": "10.0.0.1:0", "asNumber": 1},
            (
                "spec.peerIP",
                "'10.0.0.1:0' must be an IP address, optionally with a port as <IPv4>:<port> or "
                "[<IPv6>]:<port>; the port must be 1-65535",
            ),
        ),
        (
            {"peerIP": "fd00::1:179x"},
            (
                "spec.peerIP",
                "'fd00::1:179x' must be an IP address, optionally with a port as <IPv4>:<port> or "
                "[<IPv6>]:<port>",
            ),
        ),
        (
            {"node": "a", "nodeSelector": "all()"},
            ("spec.nodeSelector", "node and nodeSelector cannot both be set"),
        ),
        (
            {"peerIP": "10.0.0.1", "peerSelector": "all()"},
            ("spec.peerSelector", "peerIP and peerSelector cannot both be set"),
        ),
        (
            {"peerSelector": "all()", "asNumber": 64512},
            ("spec.asNumber", "asNumber must be empty when peerSelector is set"),
        ),
        (
            {"localWorkloadSelector": "color == 'red'"},
            ("spec.asNumber", "asNumber is required when localWorkloadSelector is set"),
        ),
        (
            {"localWorkloadSelector": "all()", "peerIP": "10.0.0.1", "asNumber": 1},
            ("spec.peerIP", "peerIP must be empty when localWorkloadSelector is set"),
        ),
        (
            {"reachableBy": "10.0.0.254"},
            ("spec.reachableBy", "reachableBy must be empty when peerIP is empty"),
        ),
        (
            {"peerIP": "10.0.0.1", "reachableBy": "fd00::1"},
            ("spec.reachableBy", "reachableBy must be the same IP family as peerIP"),
        ),
        (
            {"keepOriginalNextHop": True, "nextHopMode": "Keep"},
            (
                "spec.nextHopMode",
                "keepOriginalNextHop and nextHopMode cannot both be set; keepOriginalNextHop is "
                "deprecated, use nextHopMode instead",
            ),
        ),
        (
            {"sourceAddress": "NodeIP"},
            ("spec.sourceAddress", "Input should be 'UseNodeIP' or 'None'"),
        ),
        ({"ttlSecurity": 256}, ("spec.ttlSecurity", "Input should be less than or equal to 255")),
        (
            {"password": {"secretKeyRef": {"name": "s"}}},
            ("spec.password.secretKeyRef.key", "Field required"),
        ),
    ],
)
def test_invalid_peers(spec: dict[str, Any], expected: tuple[str, str]) -> None:
    assert errors(BGPPeer, doc("BGPPeer", spec)) == [expected]


def test_peer_selector_syntax_is_checked() -> None:
    [(loc, msg)] = errors(BGPPeer, doc("BGPPeer", {"peerSelector": "has(("}))
    assert loc == "spec.peerSelector" and "has((" in msg


FILTER = """
apiVersion: projectcalico.org/v3
kind: BGPFilter
metadata:
  name: my-filter
spec:
  exportV4:
    - action: Accept
      matchOperator: In
      cidr: 77.0.0.0/16
      prefixLength:
        min: 24
        max: 30
    - action: Reject
      source: RemotePeers
  importV4:
    - action: Reject
      matchOperator: NotIn
      cidr: 44.0.0.0/16
      interface: "eth*"
  exportV6:
    - action: Reject
      matchOperator: NotEqual
      cidr: 9000::0/64
  importV6:
    - action: Accept
      matchOperator: Equal
      cidr: 5000::0/64
"""


def test_filter_example_round_trips() -> None:
    f = BGPFilter.model_validate(yaml.safe_load(FILTER))
    assert f.spec.export_v4 is not None and f.spec.export_v4[0].prefix_length is not None
    assert f.spec.export_v4[0].prefix_length.min == 24
    assert BGPFilter.model_validate(f.to_wire()) == f
    assert resource_class("bf") is BGPFilter


@pytest.mark.parametrize(
    ("rule", "field", "expected"),
    [
        (
            {"cidr": "10.0.0.0/8", "matchOperator": "In"},
            "exportV4",
            ("spec.exportV4.0.action", "Field required"),
        ),
        (
            {"action": "Drop"},
            "exportV4",
            ("spec.exportV4.0.action", "Input should be 'Accept' or 'Reject'"),
        ),
        (
            {"action": "Accept", "cidr": "fd00::/64", "matchOperator": "In"},
            "importV4",
            ("spec.importV4.0.cidr", "'fd00::/64' is not an IPv4 CIDR"),
        ),
        (
            {"action": "Accept", "cidr": "10.0.0.0/8"},
            "exportV4",
            (
                "spec.exportV4.0.matchOperator",
                "cidr and matchOperator must both be set or both unset",
            ),
        ),
        (
            {
                "action": "Accept",
                "cidr": "fd00::/64",
                "matchOperator": "In",
                "prefixLength": {"max": 129},
            },
            "exportV6",
            ("spec.exportV6.0.prefixLength.max", "prefixLength.max 129 is out of range 0-128"),
        ),
        (
            {
                "action": "Accept",
                "cidr": "10.0.0.0/16",
                "matchOperator": "In",
                "prefixLength": {"min": 8},
            },
            "exportV4",
            (
                "spec.exportV4.0.prefixLength.min",
                "prefixLength.min 8 is shorter than the cidr prefix /16",
            ),
        ),
        (
            {"action": "Accept", "prefixLength": {"min": 24}},
            "exportV4",
            ("spec.exportV4.0.prefixLength", "prefixLength can only be set together with cidr"),
        ),
        (
            {"action": "Accept", "matchOperator": "Like", "cidr": "10.0.0.0/8"},
            "exportV4",
            (
                "spec.exportV4.0.matchOperator",
                "Input should be 'Equal', 'NotEqual', 'In' or 'NotIn'",
            ),
        ),
        (
            {"action": "Accept", "interface": "eth0;rm"},
            "exportV4",
            (
                "spec.exportV4.0.interface",
                "interface 'eth0;rm' must be 1-15 characters of letters, digits, '_', '-', '.' "
                "or '*'",
            ),
        ),
        (
            {"action": "Accept", "source": "Peers"},
            "exportV4",
            ("spec.exportV4.0.source", "Input should be 'RemotePeers'"),
        ),
    ],
)
def test_invalid_filters(rule: dict[str, Any], field: str, expected: tuple[str, str]) -> None:
    assert errors(BGPFilter, doc("BGPFilter", {field: [rule]})) == [expected]


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_asn_plain(n: int) -> None:
    assert validators.asn(n) == n
    assert validators.asn(str(n)) == n


@given(st.integers(min_value=0, max_value=0xFFFF), st.integers(min_value=0, max_value=0xFFFF))
def test_asn_dotted(high: int, low: int) -> None:
    n = validators.asn(f"{high}.{low}")
    assert n == high * 65536 + low
    assert divmod(n, 65536) == (high, low)
    peer = BGPPeer.model_validate(
        doc("BGPPeer", {"peerIP": "10.0.0.1", "asNumber": f"{high}.{low}"})
    )
    assert peer.spec.as_number == n


@given(st.integers(min_value=0x10000, max_value=10**6), st.integers(min_value=0, max_value=10))
def test_asn_dotted_out_of_range(big: int, small: int) -> None:
    for text in (f"{big}.{small}", f"{small}.{big}"):
        with pytest.raises(ValueError, match="each half must be <= 65535"):
            validators.asn(text)


@given(st.one_of(st.integers(max_value=-1), st.integers(min_value=2**32)))
def test_asn_integer_out_of_range(n: int) -> None:
    with pytest.raises(ValueError, match=r"out of range 0-4294967295|not a valid AS number"):
        validators.asn(n)
