"""Whisker's REST shapes <-> Goldmane's proto, at the HTTP edge only.

Query parameters and JSON are upstream whisker-backend's (design/whisker.md "REST API"):
``filters`` is URL-encoded JSON whose string matches are ``{"value": .., "type": "Exact" |
"Fuzzy"}``; enums travel by name. Goldmane's special names are shown as the UI shows them
("pub"/"pvt" as "PUBLIC NETWORK"/"PRIVATE NETWORK") and mapped back in filters. Every bad
value is a RequestError whose message names the parameter (HTTP 400).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from calico.gobool import go_bool
from calico.proto.goldmane import api_pb2 as pb


class RequestError(ValueError):
    """A malformed query parameter; the message names it."""


_DISPLAY_NAMES = {"pub": "PUBLIC NETWORK", "pvt": "PRIVATE NETWORK"}
_STORED_NAMES = {v: k for k, v in _DISPLAY_NAMES.items()}
_GLOBAL = "Global"

_STRING_FIELDS = ("source_names", "source_namespaces", "dest_names", "dest_namespaces", "protocols")
_FILTER_KEYS = frozenset(
    (*_STRING_FIELDS, "dest_ports", "actions", "pending_actions", "policies", "reporter")
)
_POLICY_KEYS = frozenset(("kind", "tier", "name", "namespace", "action"))


def display_name(name: str) -> str:
    return _DISPLAY_NAMES.get(name, name)


def _enum(enum: Any, name: object, what: str) -> int:
    if not isinstance(name, str) or name not in enum.DESCRIPTOR.values_by_name:
        raise RequestError(f"{what}: unknown value {name!r}")
    return int(enum.Value(name))


def _string_match(raw: object, what: str) -> pb.StringMatch:
    if isinstance(raw, str):  # a bare string is an exact match
        return pb.StringMatch(value=raw)
    if not isinstance(raw, dict) or not isinstance(raw.get("value"), str):
        raise RequestError(f'{what}: expected {{"value": string, "type": "Exact"|"Fuzzy"}}')
    extra = set(raw) - {"value", "type"}
    if extra:
        raise RequestError(f"{what}: unknown field {sorted(extra)[0]!r}")
    match_type = _enum(pb.MatchType, raw.get("type", "Exact"), f"{what}.type")
    return pb.StringMatch(value=raw["value"], type=match_type)  # type: ignore[arg-type]


def _list(raw: Mapping[str, Any], key: str) -> list[Any]:
    value = raw.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise RequestError(f"filters.{key}: expected a list")
    return value


def _to_stored(field: str, match: pb.StringMatch) -> pb.StringMatch:
    if field in ("source_names", "dest_names"):
        match.value = _STORED_NAMES.get(match.value, match.value)
    elif field in ("source_namespaces", "dest_namespaces") and match.value == _GLOBAL:
        match.value = "-"
    return match


def _port(raw: object) -> pb.PortMatch:
    value = raw.get("value") if isinstance(raw, dict) else raw
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise RequestError('filters.dest_ports: expected {"value": port 0-65535}')
    return pb.PortMatch(port=value)


def _policy(raw: object) -> pb.PolicyMatch:
    if not isinstance(raw, dict):
        raise RequestError("filters.policies: expected a list of objects")
    extra = set(raw) - _POLICY_KEYS
    if extra:
        raise RequestError(f"filters.policies: unknown field {sorted(extra)[0]!r}")
    match = pb.PolicyMatch()
    if raw.get("kind"):
        match.kind = _enum(pb.PolicyKind, raw["kind"], "filters.policies.kind")  # type: ignore[assignment]
    for field in ("tier", "namespace", "name"):
        if raw.get(field):
            getattr(match, field).CopyFrom(_string_match(raw[field], f"filters.policies.{field}"))
    if raw.get("action"):
        match.action = _enum(pb.Action, raw["action"], "filters.policies.action")  # type: ignore[assignment]
    return match


def parse_filter(text: str | None) -> pb.Filter:
    """The ``filters`` query parameter (JSON) as a proto Filter; empty or absent = no filter."""
    if not text:
        return pb.Filter()
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise RequestError(f"filters: invalid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise RequestError("filters: expected a JSON object")
    unknown = set(raw) - _FILTER_KEYS
    if unknown:
        raise RequestError(f"filters: unknown field {sorted(unknown)[0]!r}")
    out = pb.Filter()
    for field in _STRING_FIELDS:
        for item in _list(raw, field):
            getattr(out, field).append(_to_stored(field, _string_match(item, f"filters.{field}")))
    out.dest_ports.extend(_port(p) for p in _list(raw, "dest_ports"))
    for field in ("actions", "pending_actions"):
        actions = (_enum(pb.Action, a, f"filters.{field}") for a in _list(raw, field))
        getattr(out, field).extend(actions)
    out.policies.extend(_policy(p) for p in _list(raw, "policies"))
    if raw.get("reporter"):
        out.reporter = _enum(pb.Reporter, raw["reporter"], "filters.reporter")  # type: ignore[assignment]
    return out


def parse_time(value: str | None, what: str) -> int:
    """Unix seconds (negative = relative to now, as Goldmane) or an RFC 3339 timestamp."""
    if not value:
        return 0
    try:
        return int(value, 10)
    except ValueError:
        pass
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise RequestError(f"{what}: expected unix seconds or RFC 3339, got {value!r}") from None
    if stamp.tzinfo is None:
        raise RequestError(f"{what}: RFC 3339 time needs a zone offset, got {value!r}")
    return int(stamp.timestamp())


def parse_int(value: str | None, what: str, default: int = 0) -> int:
    if value is None or value == "":
        return default
    try:
        result = int(value, 10)
    except ValueError:
        raise RequestError(f"{what}: invalid integer {value!r}") from None
    if result < 0:
        raise RequestError(f"{what}: must not be negative, got {result}")
    return result


def parse_bool(value: str | None, what: str) -> bool:
    if value is None or value == "":
        return False
    if (flag := go_bool(value)) is not None:
        return flag
    raise RequestError(f"{what}: invalid boolean {value!r}")


def parse_sort(values: Sequence[str]) -> list[pb.SortOption]:
    return [pb.SortOption(sort_by=_enum(pb.SortBy, v, "sortBy")) for v in values]  # type: ignore[arg-type]


def parse_hint_type(value: str | None) -> int:
    if not value:
        raise RequestError("type: required (e.g. SourceName, DestNamespace, PolicyTier)")
    name = f"FilterType{value}"
    if value == "Unspecified" or name not in pb.FilterType.DESCRIPTOR.values_by_name:
        raise RequestError(f"type: unknown filter type {value!r}")
    return int(pb.FilterType.Value(name))


def _rfc3339(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def policy_hit_json(hit: pb.PolicyHit) -> dict[str, Any]:
    return {
        "kind": pb.PolicyKind.Name(hit.kind),
        "name": hit.name,
        "namespace": hit.namespace,
        "tier": hit.tier,
        "action": pb.Action.Name(hit.action),
        "policy_index": hit.policy_index,
        "rule_index": hit.rule_index,
        "trigger": policy_hit_json(hit.trigger) if hit.HasField("trigger") else None,
    }


def flow_json(flow: pb.Flow) -> dict[str, Any]:
    """Upstream's FlowResponse for one Goldmane flow, plus the source-address extension."""
    key = flow.Key
    return {
        "start_time": _rfc3339(flow.start_time),
        "end_time": _rfc3339(flow.end_time),
        "action": pb.Action.Name(key.action),
        "source_name": display_name(key.source_name),
        "source_namespace": key.source_namespace,
        "source_labels": " | ".join(flow.source_labels),
        "dest_name": display_name(key.dest_name),
        "dest_namespace": key.dest_namespace,
        "dest_labels": " | ".join(flow.dest_labels),
        "protocol": key.proto,
        "dest_port": key.dest_port,
        "reporter": pb.Reporter.Name(key.reporter),
        "policies": {
            "enforced": [policy_hit_json(h) for h in key.policies.enforced_policies],
            "pending": [policy_hit_json(h) for h in key.policies.pending_policies],
        },
        "packets_in": flow.packets_in,
        "packets_out": flow.packets_out,
        "bytes_in": flow.bytes_in,
        "bytes_out": flow.bytes_out,
        # calico-py extension (design/goldmane.md "Source IPs and ports"): the key's address
        # of a Network source ("" otherwise) and the bounded samples, ascending.
        "source_ip": key.source_ip,
        "source_ips": list(flow.source_ips),
        "source_ports": list(flow.source_ports),
    }
