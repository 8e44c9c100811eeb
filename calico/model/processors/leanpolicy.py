"""Stored Tiers and NetworkPolicies read without pydantic, for Felix's start-up read
(design/performance.md "Cold start: a start-up read without pydantic (session 7)").

A cold start validated every stored policy and tier through the v3 models, which built their
schemas (NetworkPolicy, Rule, EntityRule, Tier and their parts) on the way. The functions here
accept only a plain, common shape (known fields, exact JSON types; rules with an action,
protocols and source/destination selectors, nets and ports) and check each field with the
validators the models call; anything else, valid or not, answers None and the caller validates
through the model, which owns every error message. Accepted documents become the same v1
values, built by the processor's own functions from views with the models' attribute names.
``tests/unit/model/test_lean_policy.py`` checks, over generated documents, that a lean answer
means the processor accepts the document and gives an equal output.
"""

from __future__ import annotations

import ipaddress
from typing import Any, NamedTuple

from calico.api import validators as v
from calico.api.policynames import _NP_NAME, BUILT_IN_TIERS, _name_problem, default_policy_types
from calico.api.ruleparse import parse_port, parse_protocol, supports_ports
from calico.model import values as v1
from calico.model.keys import PolicyKey, TierKey
from calico.model.processors.common import Output
from calico.model.processors.leanmeta import Decline, name_of, top
from calico.model.processors.policy import namespaced_policy_value
from calico.model.resources import ResourceKey

_MAX_EXACT = 2**53  # an integer order float() keeps exactly (larger: the model decides)

_TIER_SPEC = frozenset({"order", "defaultAction"})
_NP_SPEC = frozenset({"tier", "order", "ingress", "egress", "selector", "types"})
_RULE = frozenset({"action", "protocol", "notProtocol", "source", "destination"})
_ENTITY = frozenset({"nets", "notNets", "selector", "notSelector", "namespaceSelector", "ports"})
_ENTITY_SELECTORS = (
    ("selector", "selector"),
    ("notSelector", "not_selector"),
    ("namespaceSelector", "namespace_selector"),
)
_ACTIONS = frozenset({"Allow", "Deny", "Log", "Pass"})
_TYPES = frozenset({"Ingress", "Egress"})


class LeanEntity(NamedTuple):
    """The fields of ``EntityRule`` that ``rules.rule_v1`` reads."""

    nets: list[str] | None
    not_nets: list[str] | None
    selector: str | None
    not_selector: str | None
    namespace_selector: str | None
    ports: list[int | str] | None
    not_ports: None = None
    services: None = None
    service_accounts: None = None


class LeanRule(NamedTuple):
    """The fields of ``Rule`` that ``rules.rule_v1`` reads."""

    action: str
    protocol: int | str | None
    not_protocol: int | str | None
    source: LeanEntity | None
    destination: LeanEntity | None
    ip_version: None = None
    icmp: None = None
    not_icmp: None = None
    http: None = None
    metadata: None = None


class LeanPolicySpec(NamedTuple):
    """The fields of ``NetworkPolicySpec`` that ``policy.namespaced_policy_value`` reads,
    with the model's defaults (tier, types) filled in."""

    tier: str
    order: float | None
    ingress: list[LeanRule] | None
    egress: list[LeanRule] | None
    selector: str | None
    types: list[str]
    service_account_selector: None = None
    performance_hints: None = None
    GLOBAL: bool = False


def lean_tier(key: ResourceKey, value: Any) -> Output | None:
    """The processor's output for a plain stored Tier, or None: validate through the model."""
    try:
        meta, spec = top(key, value, "Tier", namespaced=False)
        name = name_of(key, meta)
        v.dns1123_label(name, "tier name")
        if not spec.keys() <= _TIER_SPEC:
            return None
        order = _order(spec)
        action = spec.get("defaultAction")
        if action is not None and action not in ("Deny", "Pass"):
            return None
        if name in BUILT_IN_TIERS:  # the model's pinned orders and actions: it reports them
            want_order, want_action = BUILT_IN_TIERS[name]
            if (action or "Deny") != want_action:
                return None
            if (BUILT_IN_TIERS["default"][0] if order is None else order) != want_order:
                return None
    except (Decline, ValueError):
        return None
    default_action = "Pass" if action == "Pass" else "Deny"
    return {TierKey(key.name): v1.Tier(order=order, default_action=default_action)}


def lean_network_policy(key: ResourceKey, value: Any) -> Output | None:
    """The processor's output for a plain stored NetworkPolicy, or None."""
    try:
        meta, spec = top(key, value, "NetworkPolicy", namespaced=True)
        if _name_problem(name_of(key, meta), _NP_NAME, "policy") is not None:
            return None
        lean = _np_spec(spec)
    except (Decline, ValueError):
        return None
    pkey = PolicyKey(key.kind, key.namespace, key.name)
    return {pkey: namespaced_policy_value(lean, key.namespace)}  # type: ignore[arg-type]


def _order(spec: dict[str, Any]) -> float | None:
    order = spec.get("order")
    if order is None:
        if "order" in spec:
            raise Decline
        return None
    if type(order) is not int or not -_MAX_EXACT < order < _MAX_EXACT:
        raise Decline  # floats, booleans, huge integers: the model's coercions decide
    return float(order)


def _np_spec(spec: dict[str, Any]) -> LeanPolicySpec:
    if not spec.keys() <= _NP_SPEC:
        raise Decline
    tier = spec.get("tier", "")
    if type(tier) is not str:
        raise Decline
    if tier:
        v.dns1123_label(tier, "tier name")
    order = _order(spec)
    selector = _selector(spec, "selector")
    ingress = _rules(spec, "ingress")
    egress = _rules(spec, "egress")
    types = spec.get("types", [])
    if type(types) is not list or len(types) > 2:
        raise Decline
    if any(type(t) is not str or t not in _TYPES for t in types) or len(set(types)) < len(types):
        raise Decline  # unknown or repeated types: the model reports them
    return LeanPolicySpec(
        tier=tier or "default",
        order=order,
        ingress=ingress,
        egress=egress,
        selector=selector,
        types=types or default_policy_types(ingress, egress),
    )


def _selector(obj: dict[str, Any], field: str) -> str | None:
    """A selector field as the model keeps it (its validator's answer), or None if unset."""
    if field not in obj:
        return None
    text = obj[field]
    if type(text) is not str or len(text) > 1024 or "global(" in text:
        raise Decline
    return v.validate_selector(text) if text else text


def _rules(spec: dict[str, Any], field: str) -> list[LeanRule] | None:
    if field not in spec:
        return None
    items = spec[field]
    if type(items) is not list or len(items) > 1024:
        raise Decline
    return [_rule(item) for item in items]


def _rule(item: Any) -> LeanRule:
    if type(item) is not dict or not item.keys() <= _RULE:
        raise Decline
    action = item.get("action")
    if type(action) is not str or action not in _ACTIONS:
        raise Decline
    protocol = _protocol(item, "protocol")
    not_protocol = _protocol(item, "notProtocol")
    source = _entity(item, "source")
    destination = _entity(item, "destination")
    versions: set[int] = set()
    for ent in (source, destination):
        if ent is None:
            continue
        if ent.ports and not supports_ports(protocol):
            raise Decline
        for nets in (ent.nets, ent.not_nets):
            versions |= {ipaddress.ip_network(n, strict=False).version for n in nets or ()}
    if len(versions) > 1:  # IPv4 and IPv6 in one rule
        raise Decline
    return LeanRule(action, protocol, not_protocol, source, destination)


def _protocol(item: dict[str, Any], field: str) -> int | str | None:
    if field not in item:
        return None
    value = item[field]
    if type(value) is not str and type(value) is not int:
        raise Decline
    return parse_protocol(value)


def _entity(item: dict[str, Any], field: str) -> LeanEntity | None:
    if field not in item:
        return None
    ent = item[field]
    if type(ent) is not dict or not ent.keys() <= _ENTITY:
        raise Decline
    selectors = {py: _selector(ent, js) for js, py in _ENTITY_SELECTORS}
    return LeanEntity(
        nets=_nets(ent, "nets"),
        not_nets=_nets(ent, "notNets"),
        ports=_ports(ent),
        **selectors,
    )


def _nets(ent: dict[str, Any], field: str) -> list[str] | None:
    if field not in ent:
        return None
    nets = ent[field]
    if type(nets) is not list or len(nets) > 256 or any(type(n) is not str for n in nets):
        raise Decline
    for net in nets:
        v.cidr(net, strict=True)
    return nets


def _ports(ent: dict[str, Any]) -> list[int | str] | None:
    if "ports" not in ent:
        return None
    ports = ent["ports"]
    if type(ports) is not list or len(ports) > 50:
        raise Decline
    out: list[int | str] = []
    for port in ports:
        if type(port) is not str and type(port) is not int:
            raise Decline
        out.append(parse_port(port))
    return out
