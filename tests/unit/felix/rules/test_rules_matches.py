"""Golden expression lists for rule matches (libnftables JSON)."""

from __future__ import annotations

import pytest

from calico.felix.messages import ICMPTypeCode, PortRange, Rule
from calico.felix.rules.matches import is_family_specific, protocol_number, rule_match

V4 = {"match": {"op": "==", "left": {"meta": {"key": "nfproto"}}, "right": "ipv4"}}
V6 = {"match": {"op": "==", "left": {"meta": {"key": "nfproto"}}, "right": "ipv6"}}
TCP = {"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": 6}}


def m(left, right, op="=="):
    return {"match": {"op": op, "left": left, "right": right}}


def pl(proto, field):
    return {"payload": {"protocol": proto, "field": field}}


def test_protocol_names_and_numbers() -> None:
    assert protocol_number("TCP") == 6
    assert protocol_number("icmpv6") == 58
    assert protocol_number(132) == 132
    assert protocol_number("17") == 17
    with pytest.raises(ValueError):
        protocol_number("bogus")


def test_agnostic_rule_has_no_family_guard() -> None:
    rule = Rule("allow", protocol="tcp", dst_ports=(PortRange(80, 80), PortRange(1000, 2000)))
    assert not is_family_specific(rule)
    got = rule_match(rule, None)
    assert got is not None and not got.alternatives
    assert got.exprs == [
        TCP,
        m(pl("th", "dport"), {"set": [80, {"range": [1000, 2000]}]}),
    ]


def test_nets_are_split_by_family_and_collapsed() -> None:
    rule = Rule("allow", src_net=("10.0.0.0/8", "10.1.0.0/16", "1.2.3.4/32", "fd00::/64"))
    v4 = rule_match(rule, 4)
    v6 = rule_match(rule, 6)
    assert v4 is not None and v6 is not None
    assert v4.exprs == [
        V4,
        m(pl("ip", "saddr"), {"set": ["1.2.3.4", {"prefix": {"addr": "10.0.0.0", "len": 8}}]}),
    ]
    assert v6.exprs == [V6, m(pl("ip6", "saddr"), {"prefix": {"addr": "fd00::", "len": 64}})]


def test_rule_with_only_other_family_nets_is_skipped() -> None:
    rule = Rule("allow", dst_net=("fd00::1",), not_src_net=("10.0.0.1",))
    assert rule_match(rule, 4) is None
    v6 = rule_match(rule, 6)
    assert v6 is not None
    assert v6.exprs == [V6, m(pl("ip6", "daddr"), "fd00::1")]  # v4 not-net dropped


def test_ip_version_and_icmp_family_skips() -> None:
    assert rule_match(Rule("allow", ip_version=6), 4) is None
    assert rule_match(Rule("allow", protocol="icmp"), 6) is None
    assert rule_match(Rule("allow", protocol="icmpv6"), 4) is None


def test_ip_sets_and_negations() -> None:
    rule = Rule(
        "deny",
        src_ip_set_ids=("s:a",),
        not_dst_ip_set_ids=("s:b",),
        not_protocol="udp",
        not_dst_ports=(PortRange(53, 53),),
    )
    got = rule_match(rule, 6)
    assert got is not None
    assert got.exprs == [
        V6,
        {"match": {"op": "!=", "left": {"meta": {"key": "l4proto"}}, "right": 17}},
        m(pl("ip6", "saddr"), "@cali60s:a"),
        m(pl("ip6", "daddr"), "@cali60s:b", "!="),
        m(pl("th", "dport"), 53, "!="),
    ]


def _concat(proto: str, addr: str, port: str) -> dict:
    return {"concat": [pl(proto, addr), {"meta": {"key": "l4proto"}}, pl("th", port)]}


def test_single_named_port_is_inline_and_mixed_ports_become_alternatives() -> None:
    got = rule_match(Rule("allow", src_named_port_ip_set_ids=("n:x",)), 4)
    assert got is not None
    assert got.exprs == [V4, m(_concat("ip", "saddr", "sport"), "@cali40n:x")]
    assert not got.alternatives

    mixed = Rule(
        "allow", protocol="tcp", dst_ports=(PortRange(80, 80),), dst_named_port_ip_set_ids=("n:x",)
    )
    got = rule_match(mixed, 4)
    assert got is not None
    assert got.exprs == [V4, TCP]
    assert got.alternatives == [
        [[m(pl("th", "dport"), 80)], [m(_concat("ip", "daddr", "dport"), "@cali40n:x")]]
    ]


def test_service_sets() -> None:
    got = rule_match(Rule("allow", dst_ip_port_set_ids=("svc:a",), src_ip_port_set_ids=("x",)), 4)
    assert got is not None
    assert got.exprs == [
        V4,
        m(pl("ip", "saddr"), "@cali40x"),
        m(_concat("ip", "daddr", "dport"), "@cali40svc:a"),
    ]


def test_icmp_type_code_and_negation() -> None:
    got = rule_match(Rule("allow", protocol="icmp", icmp=ICMPTypeCode(8, 0)), None)
    assert got is not None
    assert got.exprs == [
        {"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": 1}},
        m(pl("icmp", "type"), 8),
        m(pl("icmp", "code"), 0),
    ]
    got = rule_match(Rule("allow", protocol="icmpv6", not_icmp=ICMPTypeCode(128, 0)), None)
    assert got is not None
    assert got.exprs[1:] == [
        m(
            {"concat": [pl("icmpv6", "type"), pl("icmpv6", "code")]},
            {"set": [{"concat": [128, 0]}]},
            "!=",
        )
    ]
    got = rule_match(Rule("allow", protocol=1, not_icmp=ICMPTypeCode(13)), None)
    assert got is not None
    assert got.exprs[1:] == [m(pl("icmp", "type"), 13, "!=")]
    with pytest.raises(ValueError):
        rule_match(Rule("allow", protocol="tcp", icmp=ICMPTypeCode(8)), None)


def test_family_specific_rule_needs_a_version() -> None:
    with pytest.raises(ValueError):
        rule_match(Rule("allow", src_net=("10.0.0.0/8",)), None)
