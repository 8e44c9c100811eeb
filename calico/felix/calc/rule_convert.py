"""A v1 rule (``calico.model.values.Rule``) + the IP set IDs the RuleScanner chose ->
``messages.Rule``, and rule IDs. Port parsing and family inference are
``calico.policyeval.rulesem``'s (shared with ``calicoctl explain``).

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
from calico.model import values as v1
from calico.policyeval import rulesem
from calico.policyeval.rulesem import infer_ip_version

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency; keep working without it
    _orjson = None  # type: ignore[assignment]

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
    parsed = rulesem.parse_port(port)
    return PortRange(*parsed) if isinstance(parsed, tuple) else parsed


def split_ports(ports: Sequence[int | str] | None) -> tuple[tuple[PortRange, ...], list[str]]:
    """(numeric ranges, named ports), each in the order given."""
    numeric, named = rulesem.split_ports(ports)
    return tuple(PortRange(*r) for r in numeric), named


def _icmp(icmp_type: int | None, icmp_code: int | None) -> ICMPTypeCode | None:
    return None if icmp_type is None else ICMPTypeCode(icmp_type, icmp_code)


def _http(http: v1.HTTPMatch | None) -> HTTPMatch | None:
    if http is None:
        return None
    paths = tuple(
        ("exact", p.exact) if p.exact else ("prefix", p.prefix)
        for p in http.paths
        if p.exact or p.prefix
    )
    return HTTPMatch(methods=http.methods, paths=paths)


def convert_rule(rule: v1.Rule, ipset_ids: Mapping[str, Sequence[str]]) -> Rule:
    """One v1 rule as a ``messages.Rule`` without its ID.

    ``ipset_ids`` maps the fields in :data:`IPSET_FIELDS` to the IDs that replace the rule's
    selectors, named ports and services (computed by the RuleScanner); named ports are dropped
    from the port lists here because their sets carry them.
    """
    return Rule(**rule_fields(rule, ipset_ids))


def rule_fields(rule: v1.Rule, ipset_ids: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """:func:`convert_rule`'s ``messages.Rule`` fields (all but ``rule_id``) as a dict, so the
    rule ID can be computed before the (frozen, 33-field) Rule is built once."""
    metadata = rule.metadata.annotations if rule.metadata is not None else {}
    fields = dict(_DEFAULTS)
    fields |= {
        "action": rule.action,
        "ip_version": infer_ip_version(rule.ip_version, rule.protocol),
        "protocol": rule.protocol,
        "not_protocol": rule.not_protocol,
        "src_net": rule.src_nets,
        "src_ports": _numeric(rule.src_ports),
        "dst_net": rule.dst_nets,
        "dst_ports": _numeric(rule.dst_ports),
        "icmp": _icmp(rule.icmp_type, rule.icmp_code),
        "not_src_net": rule.not_src_nets,
        "not_src_ports": _numeric(rule.not_src_ports),
        "not_dst_net": rule.not_dst_nets,
        "not_dst_ports": _numeric(rule.not_dst_ports),
        "not_icmp": _icmp(rule.not_icmp_type, rule.not_icmp_code),
        "http_match": _http(rule.http),
        "original_src_selector": rule.orig_src_selector,
        "original_dst_selector": rule.orig_dst_selector,
        "original_not_src_selector": rule.orig_not_src_selector,
        "original_not_dst_selector": rule.orig_not_dst_selector,
        "original_src_namespace_selector": rule.orig_src_namespace_selector,
        "original_dst_namespace_selector": rule.orig_dst_namespace_selector,
        "metadata": tuple(sorted(metadata.items())),
    }
    for name in IPSET_FIELDS:
        fields[name] = tuple(ipset_ids.get(name, ()))
    return fields


# Every field of Rule with a default but ``rule_id``: what rule_fields does not set itself.
_DEFAULTS = {
    f.name: f.default
    for f in dataclasses.fields(Rule)
    if f.default is not dataclasses.MISSING and f.name != "rule_id"
}


def _numeric(ports: Sequence[int | str] | None) -> tuple[PortRange, ...]:
    return split_ports(ports)[0] if ports else ()


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(value: Any) -> tuple[str, ...] | None:
    """The field names of a dataclass instance (kept per type), else None."""
    names = _FIELD_NAMES.get(type(value))
    if names is None:
        if not dataclasses.is_dataclass(value) or isinstance(value, type):
            return None
        names = _FIELD_NAMES[type(value)] = tuple(f.name for f in dataclasses.fields(value))
    return names


def _plain(value: Any) -> Any:
    """What ``dataclasses.asdict`` makes of a rule's field value, for JSON: nested dataclasses
    as dicts of their fields, tuples and lists as lists. ``asdict`` deep-copies everything on
    the way and was ~70% of a policy activation in the calc graph at 1,000 policies
    (design/performance.md "TTFR: one ack per batch, and the kernel's jump validation")."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    names = _field_names(value)
    if names is None:
        return value
    return {name: _plain(getattr(value, name)) for name in names}


# One encoder: ``json.dumps`` with options builds a new one per call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)


# Rule's fields but ``rule_id``, in the sorted order of the canonical JSON, each with its
# ``"name":`` text; and the JSON of the values most fields hold (empty or unset).
_RULE_FIELDS = tuple(
    (name, _CANONICAL.encode(name) + ":")
    for name in sorted(f.name for f in dataclasses.fields(Rule))
    if name != "rule_id"
)
_COMMON_JSON = {"": '""', None: "null", (): "[]"}


def canonical_rule_bytes(rule: Rule) -> bytes:
    """The bytes hashed for a rule's ID: canonical JSON of every field except ``rule_id``
    (``json.dumps`` of ``dataclasses.asdict`` with sorted keys, compact separators, ASCII)."""
    return canonical_field_bytes(vars(rule))


_FIELD_SET = frozenset(name for name, _ in _RULE_FIELDS)
# Dataclass values (PortRange, ICMPTypeCode, HTTPMatch) go to ``_dataclass_fields`` and come
# back as dicts, which are then sorted too; str and int subclasses go there and are refused.
_ORJSON_OPTIONS = (
    0
    if _orjson is None
    else _orjson.OPT_SORT_KEYS
    | _orjson.OPT_PASSTHROUGH_DATACLASS
    | _orjson.OPT_PASSTHROUGH_SUBCLASS
)


def _dataclass_fields(value: Any) -> dict[str, Any]:
    """orjson's ``default``: a dataclass instance as ``asdict``'s top level (its nested values
    come back here in turn); anything else is refused, so the reference writes it."""
    names = _field_names(value)
    if names is None:
        raise TypeError(type(value).__name__)
    return {name: getattr(value, name) for name in names}


def canonical_field_bytes(fields: Mapping[str, Any]) -> bytes:
    """:func:`canonical_rule_bytes` of the Rule whose fields are ``fields`` (every field but
    ``rule_id`` present): orjson's text where it is the reference's, else the reference.

    orjson writes the same sorted compact text ~5x faster for what a Rule holds (``str``,
    ``int``, None, tuples, the three dataclasses; no floats, by the field types) as long as it
    is ASCII without DEL, which the stdlib escapes (``ensure_ascii``); anything else, and a
    mapping that is not exactly the fields, goes to :func:`canonical_field_bytes_reference`.
    It was ~14 of the ~130 µs of a policy's activation (design/performance.md "Statement keys
    through orjson (session 13)"); ``tests/unit/felix/calc/test_rule_convert.py`` checks it
    against ``dataclasses.asdict`` and ``json.dumps``."""
    if _orjson is not None and fields.keys() == _FIELD_SET:
        try:
            raw = _orjson.dumps(fields, default=_dataclass_fields, option=_ORJSON_OPTIONS)
        except TypeError:  # orjson.JSONEncodeError: the reference writes it (or raises)
            pass
        else:
            if raw.isascii() and b"\x7f" not in raw:
                return raw
    return canonical_field_bytes_reference(fields)


def canonical_field_bytes_reference(fields: Mapping[str, Any]) -> bytes:
    """:func:`canonical_field_bytes` without orjson. Written field by field: empty values as
    constants, the text of other plain values (strings, exact ints, tuples of strings) kept
    per field and value."""
    parts = []
    cache = _FIELD_TEXT
    for name, head in _RULE_FIELDS:
        value = fields[name]
        if value is None or value == "" or value == ():
            parts.append(head + _COMMON_JSON[value])
            continue
        kind = type(value)
        cacheable = kind is str or kind is int or (kind is tuple and _all_str(value))
        text = cache.get((name, value)) if cacheable else None
        if text is None:
            text = head + _CANONICAL.encode(_plain(value))
            if cacheable:
                if len(cache) >= _FIELD_TEXT_MAX:
                    cache.clear()
                cache[(name, value)] = text
        parts.append(text)
    return ("{" + ",".join(parts) + "}").encode("ascii")


def _all_str(values: tuple[Any, ...]) -> bool:
    return all(type(v) is str for v in values)


# (field name, plain value) -> its ``"name":value`` text. Only str, exact int and tuple-of-str
# values go in, whose equality implies equal JSON (1 == 1.0 == True does not reach here); the
# cache is cleared when full, so policy churn cannot grow it without bound.
_FIELD_TEXT: dict[tuple[str, Any], str] = {}
_FIELD_TEXT_MAX = 8192


def _next_id(digest: bytes, body: bytes) -> tuple[bytes, str]:
    digest = hashlib.sha224(digest + body).digest()
    return digest, base64.urlsafe_b64encode(digest)[:RULE_ID_LENGTH].decode("ascii")


def with_rule_ids(rules: Sequence[Rule], seed: str) -> tuple[Rule, ...]:
    """``rules`` with ``rule_id`` filled in by the chained SHA-224 scheme (pure)."""
    digest = hashlib.sha224(seed.encode("utf-8", "surrogatepass")).digest()
    out: list[Rule] = []
    for rule in rules:
        digest, rule_id = _next_id(digest, canonical_rule_bytes(rule))
        out.append(dataclasses.replace(rule, rule_id=rule_id))
    return tuple(out)


def rules_with_ids(fields: Sequence[dict[str, Any]], seed: str) -> tuple[Rule, ...]:
    """``with_rule_ids`` of the Rules whose fields (:func:`rule_fields`) are ``fields``, each
    Rule built once with its ID (``dataclasses.replace`` re-runs the 33-field frozen init).
    The dicts gain a ``rule_id`` key."""
    digest = hashlib.sha224(seed.encode("utf-8", "surrogatepass")).digest()
    out: list[Rule] = []
    for rule in fields:
        digest, rule["rule_id"] = _next_id(digest, canonical_field_bytes(rule))
        out.append(Rule(**rule))
    return tuple(out)


def deny_all_rules() -> tuple[Rule, ...]:
    """The single-deny rule list of the "default-drop" profile used for a missing profile."""
    return (Rule(action="deny"),)
