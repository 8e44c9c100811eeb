"""ValidationFilter: the graph's front door; an invalid value becomes a deletion.

Why: every node downstream assumes well-formed values (parsable selectors, real CIDRs, known
actions). Upstream re-validates each v1 value before the graph; a value that fails is passed on
as a delete so that whatever the key held before is withdrawn rather than left stale.

Contracts:

* Only the value shapes the graph consumes are checked (endpoints, policies, profiles, tiers,
  network sets); other keys pass through untouched.
* A workload endpoint with an empty interface name, or one asking for source-spoofing while
  ``workload_source_spoofing`` is not ``Any``, is invalid (as upstream).
* Each key is logged once when it becomes invalid (and again only after it was valid or deleted
  in between), so a flapping bad resource cannot flood the log.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable, Mapping
from typing import Any

from calico.felix.calc.rule_convert import parse_port
from calico.model import (
    HostEndpointKey,
    NetworkSetKey,
    PolicyKey,
    ProfileLabelsKey,
    ProfileRulesKey,
    TierKey,
    WorkloadEndpointKey,
)
from calico.selector import SelectorParseError
from calico.selector import validate as validate_selector

log = logging.getLogger(__name__)

ACTIONS = frozenset({"allow", "deny", "log", "next-tier", "pass"})
POLICY_TYPES = frozenset({"ingress", "egress"})


class Invalid(ValueError):
    """A value that must not reach the graph."""


def _check(cond: bool, reason: str) -> None:
    if not cond:
        raise Invalid(reason)


def _labels(value: Any, what: str = "labels") -> None:
    if value is None:
        return
    _check(isinstance(value, Mapping), f"{what} is not an object")
    for k, v in value.items():
        _check(isinstance(k, str) and isinstance(v, str), f"{what}: non-string entry {k!r}")


def _str_list(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    _check(isinstance(value, list | tuple), f"{what} is not a list")
    _check(all(isinstance(v, str) for v in value), f"{what} has a non-string entry")
    return list(value)


def _nets(value: Any, what: str) -> None:
    for net in _str_list(value, what):
        try:
            ipaddress.ip_network(net, strict=False)
        except ValueError:
            raise Invalid(f"{what}: bad CIDR {net!r}") from None


def _addrs(value: Any, what: str) -> None:
    for addr in _str_list(value, what):
        try:
            ipaddress.ip_address(addr)
        except ValueError:
            raise Invalid(f"{what}: bad IP {addr!r}") from None


def _selector(value: Any, what: str) -> None:
    if value is None or value == "":
        return
    _check(isinstance(value, str), f"{what} is not a string")
    try:
        validate_selector(value)
    except SelectorParseError as exc:
        raise Invalid(f"{what}: {exc}") from None


def _ports(value: Any, what: str) -> None:
    if value is None:
        return
    _check(isinstance(value, list | tuple), f"{what} is not a list")
    for port in value:
        _check(isinstance(port, int | str) and not isinstance(port, bool), f"{what}: {port!r}")
        parsed = parse_port(port)
        if isinstance(parsed, str):
            _check(bool(parsed) and ":" not in parsed, f"{what}: bad port {port!r}")
        else:
            _check(0 <= parsed.first <= parsed.last <= 65535, f"{what}: bad range {port!r}")


def _named_ports(value: Any) -> None:
    if value is None:
        return
    _check(isinstance(value, list | tuple), "ports is not a list")
    for port in value:
        _check(isinstance(port, Mapping), "ports entry is not an object")
        _check(isinstance(port.get("port"), int), f"ports: bad port number in {port!r}")


def _rule(rule: Any) -> None:
    _check(isinstance(rule, Mapping), "rule is not an object")
    _check(rule.get("action", "allow") in ACTIONS, f"unknown action {rule.get('action')!r}")
    for side in ("src", "dst"):
        for prefix in ("", "!"):
            _selector(rule.get(f"{prefix}{side}_selector"), f"{prefix}{side}_selector")
            _nets(rule.get(f"{prefix}{side}_nets"), f"{prefix}{side}_nets")
            _ports(rule.get(f"{prefix}{side}_ports"), f"{prefix}{side}_ports")
    _check(rule.get("ip_version") in (None, 4, 6), "ip_version must be 4 or 6")


def _rules(value: Any, what: str) -> None:
    if value is None:
        return
    _check(isinstance(value, list | tuple), f"{what} is not a list")
    for rule in value:
        _rule(rule)


def _policy(value: Mapping[str, Any]) -> None:
    _selector(value.get("selector"), "selector")
    order = value.get("order")
    _check(order is None or isinstance(order, int | float), "order is not a number")
    types = _str_list(value.get("types"), "types")
    _check(all(t.lower() in POLICY_TYPES for t in types), f"bad types {types!r}")
    _rules(value.get("inbound_rules"), "inbound_rules")
    _rules(value.get("outbound_rules"), "outbound_rules")


def _tier(value: Mapping[str, Any]) -> None:
    order = value.get("order")
    _check(order is None or isinstance(order, int | float), "order is not a number")
    action = value.get("defaultAction")
    _check(action in (None, "Deny", "Pass"), f"bad defaultAction {action!r}")


def validate(key: Any, value: Any, *, workload_source_spoofing: str = "Disabled") -> None:
    """Raise :class:`Invalid` if ``value`` must not reach the graph for ``key``."""
    if value is None:
        return
    if isinstance(key, ProfileLabelsKey):
        _labels(value)
        return
    checked = (
        WorkloadEndpointKey,
        HostEndpointKey,
        PolicyKey,
        ProfileRulesKey,
        TierKey,
        NetworkSetKey,
    )
    if not isinstance(key, checked):
        return
    _check(isinstance(value, Mapping), "value is not an object")
    if isinstance(key, WorkloadEndpointKey):
        _check(bool(value.get("name")), "workload endpoint has no interface name")
        _labels(value.get("labels"))
        _str_list(value.get("profile_ids"), "profile_ids")
        _nets(value.get("ipv4_nets"), "ipv4_nets")
        _nets(value.get("ipv6_nets"), "ipv6_nets")
        _named_ports(value.get("ports"))
        if value.get("allow_spoofed_source_ips"):
            _check(workload_source_spoofing == "Any", "source spoofing is not allowed")
    elif isinstance(key, HostEndpointKey):
        _labels(value.get("labels"))
        _str_list(value.get("profile_ids"), "profile_ids")
        _addrs(value.get("expected_ipv4_addrs"), "expected_ipv4_addrs")
        _addrs(value.get("expected_ipv6_addrs"), "expected_ipv6_addrs")
        _named_ports(value.get("ports"))
    elif isinstance(key, PolicyKey):
        _policy(value)
    elif isinstance(key, ProfileRulesKey):
        _rules(value.get("inbound_rules"), "inbound_rules")
        _rules(value.get("outbound_rules"), "outbound_rules")
    elif isinstance(key, TierKey):
        _tier(value)
    else:
        _labels(value.get("labels"))
        _nets(value.get("nets"), "nets")
        _str_list(value.get("profile_ids"), "profile_ids")


class ValidationFilter:
    """Wraps the graph's entry point: ``on_update(key, value)`` forwards a (possibly nulled)
    value to ``downstream``."""

    def __init__(
        self,
        downstream: Callable[[Any, Any], object],
        *,
        workload_source_spoofing: str = "Disabled",
    ) -> None:
        self._downstream = downstream
        self._spoofing = workload_source_spoofing
        self._invalid: set[Any] = set()

    def on_update(self, key: Any, value: Any) -> None:
        try:
            validate(key, value, workload_source_spoofing=self._spoofing)
        except Invalid as exc:
            if key not in self._invalid:
                self._invalid.add(key)
                log.warning("Invalid value for %s (%s); treating it as deleted", key, exc)
            value = None
        else:
            self._invalid.discard(key)
        self._downstream(key, value)
