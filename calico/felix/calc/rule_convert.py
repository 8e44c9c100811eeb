"""v1 rule JSON + the IP set IDs the RuleScanner chose -> ``messages.Rule``, and rule IDs.

Rule IDs follow upstream's scheme (felix/calc/rule_convert.go): hash the seed with SHA-224, then
for each rule in order hash *the previous digest* plus a serialisation of the rule (with an empty
``rule_id``), and keep the first 16 characters of the unpadded base64url digest. Chaining makes a
rule's ID depend on its position and on every rule before it, so identical rules in one policy
still get distinct IDs.

Upstream serialises the rule as protobuf bytes; we have no protobuf here, so the serialisation is
canonical JSON of the Rule dataclass (sorted keys, compact separators, tuples as lists). IDs are
therefore stable across runs and Python versions but not byte-identical to upstream's.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from calico.felix.messages import HTTPMatch, ICMPTypeCode, PortRange, Rule

RULE_ID_LENGTH = 16

#: The rule-ID seeds upstream uses; note the literal "default" whatever the policy's tier.
POLICY_INBOUND_SEED = "pol-in-default/{name}"
POLICY_OUTBOUND_SEED = "pol-out-default/{name}"
PROFILE_INBOUND_SEED = "prof-in-{name}"
PROFILE_OUTBOUND_SEED = "prof-out-{name}"

#: Per-side IP set ID fields of ``messages.Rule`` a scanner may fill.
IPSET_FIELDS = (
    "src_ip_set_ids",
    "src_named_port_ip_set_ids",
    "dst_ip_set_ids",
    "dst_named_port_ip_set_ids",
    "dst_ip_port_set_ids",
    "not_src_ip_set_ids",
    "not_src_named_port_ip_set_ids",
    "not_dst_ip_set_ids",
    "not_dst_named_port_ip_set_ids",
)


def parse_port(port: int | str) -> PortRange | str:
    """``80`` / ``"80"`` / ``"1000:2000"`` -> PortRange; anything else is a port *name*."""
    if isinstance(port, int):
        return PortRange(port, port)
    text = str(port)
    if text.isdigit():
        return PortRange(int(text), int(text))
    first, sep, last = text.partition(":")
    if sep and first.isdigit() and last.isdigit():
        return PortRange(int(first), int(last))
    return text


def split_ports(ports: Sequence[int | str] | None) -> tuple[tuple[PortRange, ...], list[str]]:
    """(numeric ranges, named ports), each in the order given."""
    numeric: list[PortRange] = []
    named: list[str] = []
    for port in ports or ():
        parsed = parse_port(port)
        if isinstance(parsed, PortRange):
            numeric.append(parsed)
        else:
            named.append(parsed)
    return tuple(numeric), named


def infer_ip_version(ip_version: int | None, protocol: int | str | None) -> int | None:
    """Upstream infers the family from ICMP protocols when the rule does not name one."""
    if ip_version in (4, 6):
        return ip_version
    if protocol == "icmp":
        return 4
    if protocol == "icmpv6":
        return 6
    return None


def _icmp(rule: Mapping[str, Any], prefix: str) -> ICMPTypeCode | None:
    icmp_type = rule.get(f"{prefix}icmp_type")
    if icmp_type is None:
        return None
    return ICMPTypeCode(int(icmp_type), rule.get(f"{prefix}icmp_code"))


def _http(rule: Mapping[str, Any]) -> HTTPMatch | None:
    http = rule.get("http")
    if http is None:
        return None
    paths: list[tuple[str, str]] = []
    for path in http.get("paths") or ():
        for kind in ("exact", "prefix"):
            if path.get(kind):
                paths.append((kind, path[kind]))
                break
    return HTTPMatch(methods=tuple(http.get("methods") or ()), paths=tuple(paths))


def _metadata(rule: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    annotations = (rule.get("metadata") or {}).get("annotations") or {}
    return tuple(sorted(annotations.items()))


def convert_rule(rule: Mapping[str, Any], ipset_ids: Mapping[str, Sequence[str]]) -> Rule:
    """One v1 rule as a ``messages.Rule`` without its ID.

    ``ipset_ids`` maps the fields in :data:`IPSET_FIELDS` to the IDs that replace the rule's
    selectors, named ports and services (computed by the RuleScanner); named ports are dropped
    from the port lists here because their sets carry them.
    """
    protocol = rule.get("protocol")
    ports = {
        side: split_ports(rule.get(side))[0]
        for side in ("src_ports", "dst_ports", "!src_ports", "!dst_ports")
    }
    return Rule(
        action=rule.get("action", "allow"),
        ip_version=infer_ip_version(rule.get("ip_version"), protocol),
        protocol=protocol,
        not_protocol=rule.get("!protocol"),
        src_net=tuple(rule.get("src_nets") or ()),
        src_ports=ports["src_ports"],
        dst_net=tuple(rule.get("dst_nets") or ()),
        dst_ports=ports["dst_ports"],
        icmp=_icmp(rule, ""),
        not_src_net=tuple(rule.get("!src_nets") or ()),
        not_src_ports=ports["!src_ports"],
        not_dst_net=tuple(rule.get("!dst_nets") or ()),
        not_dst_ports=ports["!dst_ports"],
        not_icmp=_icmp(rule, "!"),
        http_match=_http(rule),
        original_src_selector=rule.get("orig_src_selector") or "",
        original_dst_selector=rule.get("orig_dst_selector") or "",
        original_not_src_selector=rule.get("!orig_src_selector") or "",
        original_not_dst_selector=rule.get("!orig_dst_selector") or "",
        original_src_namespace_selector=rule.get("orig_src_namespace_selector") or "",
        original_dst_namespace_selector=rule.get("orig_dst_namespace_selector") or "",
        metadata=_metadata(rule),
        **{name: tuple(ipset_ids.get(name, ())) for name in IPSET_FIELDS},
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    return value


def canonical_rule_bytes(rule: Rule) -> bytes:
    """The bytes hashed for a rule's ID: canonical JSON of every field except ``rule_id``."""
    data = dataclasses.asdict(rule)
    data.pop("rule_id", None)
    return json.dumps(
        {k: _jsonable(v) for k, v in data.items()},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
    ).encode("ascii")


def with_rule_ids(rules: Sequence[Rule], seed: str) -> tuple[Rule, ...]:
    """``rules`` with ``rule_id`` filled in by the chained SHA-224 scheme (pure)."""
    digest = hashlib.sha224(seed.encode("utf-8", "surrogatepass")).digest()
    out: list[Rule] = []
    for rule in rules:
        digest = hashlib.sha224(digest + canonical_rule_bytes(rule)).digest()
        rule_id = base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")[:RULE_ID_LENGTH]
        out.append(dataclasses.replace(rule, rule_id=rule_id))
    return tuple(out)


def deny_all_rules() -> tuple[Rule, ...]:
    """The single-deny rule list of the "default-drop" profile used for a missing profile."""
    return (Rule(action="deny"),)
