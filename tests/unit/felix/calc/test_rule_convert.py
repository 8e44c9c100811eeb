"""rule_convert: v1 rule JSON -> messages.Rule, and chained SHA-224 rule IDs."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.calc import rule_convert
from calico.felix.calc.rule_convert import (
    canonical_field_bytes,
    canonical_rule_bytes,
    convert_rule,
    parse_port,
    rules_with_ids,
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


# -- the canonical bytes without dataclasses.asdict -------------------------------------------

_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
_ports = st.tuples(*[st.builds(PortRange, st.integers(0, 65535), st.integers(0, 65535))] * 2)
_icmp = st.none() | st.builds(ICMPTypeCode, st.integers(0, 255), st.none() | st.integers(0, 255))
_http = st.none() | st.builds(
    HTTPMatch,
    st.lists(_text, max_size=3).map(tuple),
    st.lists(st.tuples(st.sampled_from(("exact", "prefix")), _text), max_size=2).map(tuple),
)
_strs = st.lists(_text, max_size=3).map(tuple)
rules = st.builds(
    Rule,
    action=st.sampled_from(("allow", "deny", "log", "next-tier")),
    ip_version=st.sampled_from((None, 4, 6)),
    protocol=st.none() | st.integers(0, 255) | st.sampled_from(("tcp", "udp")),
    src_net=_strs,
    src_ports=st.lists(_ports.map(lambda p: p[0]), max_size=2).map(tuple),
    dst_ip_set_ids=_strs,
    icmp=_icmp,
    not_icmp=_icmp,
    http_match=_http,
    original_src_selector=_text,
    metadata=st.lists(st.tuples(_text, _text), max_size=2).map(tuple),
    rule_id=_text,
)


def reference_bytes(rule: Rule) -> bytes:
    """The definition: canonical JSON of ``dataclasses.asdict`` without ``rule_id``."""
    data = dataclasses.asdict(rule)
    data.pop("rule_id")
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


@settings(max_examples=300, deadline=None)
@given(rules)
def test_canonical_bytes_equal_the_asdict_definition(rule: Rule) -> None:
    assert canonical_rule_bytes(rule) == reference_bytes(rule)


# -- rule IDs with each Rule built once (the RuleScanner's path) -------------------------------


@settings(max_examples=300, deadline=None)
@given(st.lists(rules, max_size=4), _text)
def test_rules_with_ids_equal_with_rule_ids(rule_list: list[Rule], seed: str) -> None:
    fields = [
        {f.name: getattr(r, f.name) for f in dataclasses.fields(Rule) if f.name != "rule_id"}
        for r in rule_list
    ]
    assert rules_with_ids(fields, seed) == with_rule_ids(rule_list, seed)


@settings(max_examples=200, deadline=None)
@given(rules)
def test_canonical_bytes_stable_with_a_warm_field_cache(rule: Rule) -> None:
    """The per-(field, value) text cache never changes the bytes: computed twice, and for a
    rule whose values equal cached ones of another type (1 vs True is excluded by type)."""
    assert canonical_rule_bytes(rule) == canonical_rule_bytes(rule) == reference_bytes(rule)
    flipped = dataclasses.replace(rule, ip_version=True if rule.ip_version == 1 else 1)
    assert canonical_rule_bytes(flipped) == reference_bytes(flipped)


# -- the orjson path of canonical_field_bytes ----------------------------------------------------


def _fields(rule: Rule) -> dict[str, object]:
    return {f.name: getattr(rule, f.name) for f in dataclasses.fields(Rule) if f.name != "rule_id"}


@settings(max_examples=300, deadline=None)
@given(rules)
def test_field_bytes_through_orjson_equal_the_definition(rule: Rule) -> None:
    assert canonical_field_bytes(_fields(rule)) == reference_bytes(rule)


@pytest.mark.parametrize("char", [chr(c) for c in range(128)] + ["é", "\u2028", "😀"])
def test_field_bytes_of_every_ascii_character_and_some_others(char: str) -> None:
    """Control characters, quotes, backslash and DEL (escaped by the stdlib), non-ASCII text
    (escaped as ``\\uXXXX`` there): the bytes stay the definition's, as key and value."""
    rule = Rule(action="allow", original_src_selector=f"a{char}b", metadata=((char, char),))
    assert canonical_field_bytes(_fields(rule)) == reference_bytes(rule)


class _Str(str):
    pass


def test_field_bytes_of_subclasses_and_odd_mappings_are_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A str subclass, an integer past 64 bits, a mapping with ``rule_id`` or a field short:
    the reference writes it (or raises as it does)."""
    calls: list[object] = []
    real = rule_convert.canonical_field_bytes_reference
    monkeypatch.setattr(
        rule_convert, "canonical_field_bytes_reference", lambda f: calls.append(f) or real(f)
    )
    plain = _fields(Rule(action="allow", protocol=6))
    assert canonical_field_bytes(plain) and not calls  # the orjson path
    for odd in (
        plain | {"original_src_selector": _Str("x")},
        plain | {"protocol": 1 << 70},
        plain | {"rule_id": "r"},
    ):
        assert canonical_field_bytes(odd) == real(odd)
    assert len(calls) == 3
    short = dict(plain)
    del short["action"]
    with pytest.raises(KeyError):
        canonical_field_bytes(short)
