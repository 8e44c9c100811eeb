"""rule_convert: v1 rule JSON -> messages.Rule, and chained SHA-224 rule IDs."""

from __future__ import annotations

import base64
import hashlib

import pytest

from calico.felix.calc.rule_convert import (
    canonical_rule_bytes,
    convert_rule,
    parse_port,
    split_ports,
    with_rule_ids,
)
from calico.felix.messages import HTTPMatch, ICMPTypeCode, PortRange, Rule
from calico.model import values as v1


@pytest.mark.parametrize(
    ("port", "want"),
    [
        (80, PortRange(80, 80)),
        ("443", PortRange(443, 443)),
        ("1000:2000", PortRange(1000, 2000)),
        ("http", "http"),
        ("web-8080", "web-8080"),
    ],
)
def test_parse_port(port: int | str, want: PortRange | str) -> None:
    assert parse_port(port) == want


def test_split_ports_keeps_order() -> None:
    assert split_ports([80, "http", "90:91", "dns"]) == (
        (PortRange(80, 80), PortRange(90, 91)),
        ["http", "dns"],
    )


def test_convert_rule_fields() -> None:
    rule = convert_rule(
        v1.Rule.from_json(
            {
                "action": "deny",
                "protocol": "icmp",
                "icmp_type": 8,
                "icmp_code": 0,
                "!icmp_type": 3,
                "src_nets": ["10.0.0.0/8"],
                "!dst_nets": ["10.1.0.0/16"],
                "dst_ports": [80, "http"],
                "!src_ports": ["1:2"],
                "http": {"methods": ["GET"], "paths": [{"exact": "/a"}, {"prefix": "/b"}]},
                "metadata": {"annotations": {"z": "1", "a": "2"}},
                "orig_src_selector": "x == 'y'",
            }
        ),
        {"src_ip_set_ids": ["s:abc"], "dst_named_port_ip_set_ids": ["n:def"]},
    )
    assert rule.ip_version == 4  # inferred from ICMP
    assert rule.icmp == ICMPTypeCode(8, 0) and rule.not_icmp == ICMPTypeCode(3, None)
    assert rule.src_net == ("10.0.0.0/8",) and rule.not_dst_net == ("10.1.0.0/16",)
    assert rule.dst_ports == (PortRange(80, 80),)  # the named port lives in its IP set
    assert rule.not_src_ports == (PortRange(1, 2),)
    assert rule.src_ip_set_ids == ("s:abc",) and rule.dst_named_port_ip_set_ids == ("n:def",)
    assert rule.http_match == HTTPMatch(("GET",), (("exact", "/a"), ("prefix", "/b")))
    assert rule.metadata == (("a", "2"), ("z", "1"))
    assert rule.original_src_selector == "x == 'y'"
    icmpv6 = v1.Rule.from_json({"action": "allow", "protocol": "icmpv6"})
    assert convert_rule(icmpv6, {}).ip_version == 6


def _expected_ids(rules: list[Rule], seed: str) -> list[str]:
    digest = hashlib.sha224(seed.encode()).digest()
    out = []
    for rule in rules:
        digest = hashlib.sha224(digest + canonical_rule_bytes(rule)).digest()
        out.append(base64.urlsafe_b64encode(digest).decode().rstrip("=")[:16])
    return out


def test_rule_ids_are_chained_sha224_base64url_16() -> None:
    rules = [Rule("allow"), Rule("allow"), Rule("deny", protocol="tcp")]
    ids = [r.rule_id for r in with_rule_ids(rules, "pol-in-default/p")]
    assert ids == _expected_ids(rules, "pol-in-default/p")
    assert len(set(ids)) == 3  # identical rules differ by position
    assert all(
        len(i) == 16
        and set(i) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        for i in ids
    )
    # A change to an earlier rule changes every later ID; the seed changes all of them.
    changed = with_rule_ids([Rule("deny"), *rules[1:]], "pol-in-default/p")
    assert changed[1].rule_id != ids[1] and changed[2].rule_id != ids[2]
    other = with_rule_ids(rules, "pol-out-default/p")
    assert not {r.rule_id for r in other} & set(ids)


def test_rule_id_ignores_existing_id_and_is_stable() -> None:
    a = with_rule_ids([Rule("allow", rule_id="junk")], "s")
    b = with_rule_ids([Rule("allow")], "s")
    assert a == b
