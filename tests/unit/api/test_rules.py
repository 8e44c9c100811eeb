"""Rule, EntityRule, ICMP, HTTP and port/protocol validation (upstream's validateRule & co)."""

from __future__ import annotations

import pytest
from apihelpers import decode_error, gnp_with_rule, issues, load_one

from calico.api.rules import Rule, protocol_number, supports_ports

VALID_RULE = """
action: Allow
ipVersion: 4
protocol: TCP
metadata:
  annotations:
    from: frontend
source:
  nets: [10.0.0.0/8, 192.168.1.1]
  notNets: [10.1.0.0/16]
  selector: role == 'frontend'
  notSelector: has(quarantine)
  namespaceSelector: team == 'a'
  serviceAccounts:
    names: [api]
    selector: app == 'x'
  ports: [1024, "2000:3000", "http-alt"]
destination:
  notPorts: [22]
http:
  methods: [GET, PUT]
  paths:
  - exact: /health
  - prefix: /api/
"""


def test_valid_rule_round_trips_all_fields() -> None:
    res = load_one(gnp_with_rule(VALID_RULE))
    rule = res.spec.ingress[0]
    assert rule.source.ports == [1024, "2000:3000", "http-alt"]
    assert rule.source.service_accounts.names == ["api"]
    assert rule.http.paths[1].prefix == "/api/"
    wire = rule.to_wire()
    assert wire["source"]["notSelector"] == "has(quarantine)"
    assert Rule.model_validate(wire) == rule


@pytest.mark.parametrize(
    ("given", "canonical"),
    [("TCP", "TCP"), ("UDPLite", "UDPLite"), (6, 6), ("17", 17), (255, 255), ("ICMPv6", "ICMPv6")],
)
def test_protocol_names_and_numbers(given: object, canonical: object) -> None:
    assert Rule(action="Allow", protocol=given).protocol == canonical


@pytest.mark.parametrize("bad", ["tcp", "icmpv6", "HTTP", 0, 256, -1, True])
def test_bad_protocols(bad: object) -> None:
    rule = f"action: Allow\nprotocol: {bad if not isinstance(bad, str) else repr(bad)}\n"
    (msg,) = issues(gnp_with_rule(rule))
    assert msg.startswith("spec.ingress[0].protocol: protocol")
    assert "must be one of TCP, UDP, ICMP, ICMPv6, SCTP, UDPLite (case-sensitive) or 1-255" in msg


def test_protocol_helpers() -> None:
    assert protocol_number("ICMPv6") == 58
    assert supports_ports("SCTP") and supports_ports(17) and not supports_ports("ICMP")


@pytest.mark.parametrize(
    ("port", "canonical"), [(80, 80), ("80", 80), ("80:80", 80), ("1:65535", "1:65535")]
)
def test_port_forms(port: object, canonical: object) -> None:
    rule = Rule(action="Allow", protocol="UDP", destination={"ports": [port]})
    assert rule.destination.ports == [canonical]


@pytest.mark.parametrize(
    ("port", "message"),
    [
        (0, "port 0 is invalid: port numbers must be 1-65535"),
        ("'0:10'", "port range '0:10' is invalid: port numbers must be 1-65535"),
        ("'80-90'", "'80-90' is not a valid port name"),
        ("Http", "'Http' is not a valid port name"),
    ],
)
def test_bad_ports(port: object, message: str) -> None:
    rule = f"action: Allow\nprotocol: TCP\ndestination:\n  ports: [{port}]\n"
    (msg,) = issues(gnp_with_rule(rule))
    assert msg.startswith("spec.ingress[0].destination.ports[0]: ")
    assert message in msg


@pytest.mark.parametrize("proto", [None, "ICMP", "UDPLite", 1])
@pytest.mark.parametrize(("side", "field"), [("source", "ports"), ("destination", "notPorts")])
def test_ports_need_tcp_udp_sctp(proto: object, side: str, field: str) -> None:
    rule = "action: Allow\n" + (f"protocol: {proto}\n" if proto else "")
    rule += f"{side}:\n  {field}: [80]\n"
    assert issues(gnp_with_rule(rule)) == [
        f"spec.ingress[0].{side}.{field}: rules that specify ports must set protocol to TCP, UDP "
        "or SCTP"
    ]


def test_action_values() -> None:
    assert issues(gnp_with_rule("action: allow")) == [
        "spec.ingress[0].action: invalid value 'allow': expected 'Allow', 'Deny', 'Log' or 'Pass'"
    ]
    assert issues(gnp_with_rule("protocol: TCP")) == ["spec.ingress[0].action: field is required"]
    for action in ("Allow", "Deny", "Log", "Pass"):
        load_one(gnp_with_rule(f"action: {action}"))


def test_icmp_rules() -> None:
    load_one(gnp_with_rule("action: Allow\nprotocol: ICMP\nicmp: {type: 8, code: 0}"))
    load_one(gnp_with_rule("action: Allow\nprotocol: ICMPv6\nipVersion: 6\nicmp: {type: 128}"))
    assert issues(gnp_with_rule("action: Allow\nprotocol: ICMP\nicmp: {code: 0}")) == [
        "spec.ingress[0].icmp.code: ICMP code specified without an ICMP type"
    ]
    assert issues(gnp_with_rule("action: Allow\nprotocol: ICMP\nnotICMP: {type: 255}")) == [
        "spec.ingress[0].notICMP.type: ICMP type 255 is out of range 0-254"
    ]
    assert issues(gnp_with_rule("action: Allow\nprotocol: ICMP\nicmp: {type: 3, code: 256}")) == [
        "spec.ingress[0].icmp.code: ICMP code 256 is out of range 0-255"
    ]
    assert issues(gnp_with_rule("action: Allow\nprotocol: TCP\nicmp: {type: 8}")) == [
        "spec.ingress[0].icmp: rules that specify icmp must set protocol to ICMP or ICMPv6"
    ]


def test_icmp_ip_version() -> None:
    assert issues(gnp_with_rule("action: Allow\nprotocol: ICMP\nipVersion: 6")) == [
        "spec.ingress[0].ipVersion: protocol ICMP requires ipVersion 4"
    ]
    assert issues(gnp_with_rule("action: Allow\nnotProtocol: ICMPv6\nipVersion: 4")) == [
        "spec.ingress[0].ipVersion: protocol ICMPv6 requires ipVersion 6"
    ]
    assert issues(gnp_with_rule("action: Allow\nipVersion: 5")) == [
        "spec.ingress[0].ipVersion: invalid value 5: expected 4 or 6"
    ]


def test_nets() -> None:
    assert issues(gnp_with_rule("action: Allow\nsource:\n  nets: [10.0.0.0/33]")) == [
        "spec.ingress[0].source.nets: '10.0.0.0/33' is not a valid CIDR"
    ]
    assert issues(gnp_with_rule("action: Allow\nsource:\n  nets: [10.0.0.1/8]")) == [
        "spec.ingress[0].source.nets: '10.0.0.1/8' has host bits set; expected a network address"
    ]
    assert issues(
        gnp_with_rule("action: Allow\nipVersion: 6\ndestination:\n  nets: [1.2.3.4]")
    ) == ["spec.ingress[0].destination.nets: rule ipVersion 6 doesn't match the CIDR version"]
    mixed = "action: Allow\nsource:\n  nets: [10.0.0.0/8]\ndestination:\n  notNets: ['fd00::/8']"
    assert issues(gnp_with_rule(mixed)) == [
        "spec.ingress[0].destination.notNets: rule contains both IPv4 and IPv6 CIDRs"
    ]


def test_selectors_must_parse() -> None:
    bad = "action: Allow\nsource:\n  selector: 'has(x) &&'"
    (msg,) = issues(gnp_with_rule(bad))
    assert msg.startswith("spec.ingress[0].source.selector: invalid selector")
    bad = "action: Allow\ndestination:\n  serviceAccounts: {selector: 'a ==='}"
    (msg,) = issues(gnp_with_rule(bad))
    assert msg.startswith("spec.ingress[0].destination.serviceAccounts.selector: invalid selector")


def test_global_selector_placement() -> None:
    load_one(gnp_with_rule("action: Allow\nsource:\n  namespaceSelector: global()"))
    assert issues(gnp_with_rule("action: Allow\nsource:\n  selector: global()")) == [
        "spec.ingress[0].source.selector: global() can only be used in an EntityRule "
        "namespaceSelector"
    ]
    bad = "action: Allow\nsource:\n  namespaceSelector: global() && has(a)"
    assert issues(gnp_with_rule(bad)) == [
        "spec.ingress[0].source.namespaceSelector: global() cannot be combined with other selectors"
    ]


def test_http_match() -> None:
    assert issues(gnp_with_rule("action: Allow\nhttp:\n  paths: [{exact: /a, prefix: /b}]")) == [
        "spec.ingress[0].http.paths[0]: only one of 'exact' or 'prefix' may be set"
    ]
    assert issues(gnp_with_rule("action: Allow\nhttp:\n  paths: [{}]")) == [
        "spec.ingress[0].http.paths[0]: one of 'exact' or 'prefix' must be set"
    ]
    assert issues(gnp_with_rule("action: Allow\nhttp:\n  paths: [{exact: 'a?b'}]")) == [
        "spec.ingress[0].http.paths[0]: path 'a?b' must start with '/' and not contain '?', '#' "
        "or ' '"
    ]
    assert issues(gnp_with_rule("action: Allow\nhttp:\n  methods: [GET, GET]")) == [
        "spec.ingress[0].http.methods: methods must not contain duplicates: ['GET', 'GET']"
    ]
    assert issues(gnp_with_rule("action: Deny\nprotocol: UDP\nhttp: {methods: [GET]}")) == [
        "spec.ingress[0].protocol: rules with an http match must have protocol TCP or no protocol",
        "spec.ingress[0].http: http match is only valid on Allow rules",
    ]


def test_services_match() -> None:
    ok = "action: Allow\nsource:\n  services: {name: kube-dns, namespace: kube-system}"
    load_one(gnp_with_rule(ok))
    bad = "action: Allow\nsource:\n  services: {namespace: ns}\n  selector: a == 'b'"
    assert issues(gnp_with_rule(bad)) == [
        "spec.ingress[0].source.services.name: services must specify a service name",
        "spec.ingress[0].source.services: cannot specify selector/notSelector and services",
    ]
    bad = (
        "action: Allow\nprotocol: TCP\n"
        "destination:\n  services: {name: s, namespace: n}\n  ports: [80]"
    )
    assert issues(gnp_with_rule(bad, "egress")) == [
        "spec.egress[0].destination.ports: ports and notPorts cannot be specified with services"
    ]


def test_unknown_rule_field() -> None:
    assert decode_error(gnp_with_rule("action: Allow\nsource:\n  tag: foo")) == (
        "field in document is not recognized or is in the wrong location: tag"
    )


@pytest.mark.parametrize(
    ("port", "message"),
    [
        ("65536", "cannot unmarshal number 65536 into Go value of type uint16"),
        ("'1:65536'", "invalid maximum port number in range (1:65536)"),
        ("'65536:65537'", "invalid minimum port number in range (65536:65537)"),
        (
            "'90:80'",
            "minimum port number (90) is greater than maximum port number (80) in port range",
        ),
    ],
)
def test_numorstring_port_decode_errors(port: str, message: str) -> None:
    rule = f"action: Allow\nprotocol: TCP\ndestination:\n  ports: [{port}]\n"
    assert decode_error(gnp_with_rule(rule)) == message
