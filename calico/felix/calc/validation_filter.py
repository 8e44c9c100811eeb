"""ValidationFilter: the graph's front door; an invalid value becomes a deletion.

Why: every node downstream assumes well-formed values (parsable selectors, real CIDRs, known
actions). Upstream re-validates each v1 value before the graph; a value that fails is passed on
as a delete so that whatever the key held before is withdrawn rather than left stale.

Contracts:

* Only the value types the graph's rule and label machinery consume are checked (endpoints,
  policies, profiles, tiers, network sets); other keys pass through untouched. Values are
  typed (``calico.model.values``), so the checks are semantic, plus a type check that turns a
  value of the wrong class (a bug upstream of the graph) into a deletion too.
* A workload endpoint with an empty interface name, or one asking for source-spoofing while
  ``workload_source_spoofing`` is not ``Any``, is invalid (as upstream).
* Each key is logged once when it becomes invalid (and again only after it was valid or deleted
  in between), so a flapping bad resource cannot flood the log.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from calico.felix.calc.rule_convert import parse_port
from calico.felix.labelindex import all_host_members, check_net, host_cidrs, is_host_member
from calico.model import (
    HostEndpointKey,
    NetworkSetKey,
    PolicyKey,
    ProfileLabelsKey,
    ProfileRulesKey,
    TierKey,
    WorkloadEndpointKey,
)
from calico.model import values as v1
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
    # Messages are built only on failure: every endpoint of a snapshot passes through here.
    if not isinstance(value, Mapping):
        raise Invalid(f"{what} is not an object")
    for k, v in value.items():
        if not (isinstance(k, str) and isinstance(v, str)):
            raise Invalid(f"{what}: non-string entry {k!r}")


def _plain(text: object) -> bool:
    """A string with no surrounding whitespace: there the labelindex parsers (inet_pton fast
    path) accept exactly what ``ipaddress`` accepts, at a fraction of the cost."""
    return isinstance(text, str) and not text[:1].isspace() and not text[-1:].isspace()


def _nets(value: Iterable[str], what: str) -> None:
    if all_host_members(value):  # an endpoint's usual nets; host_cidrs then reuses the answer
        return
    for net in value:
        try:
            if type(net) is str and is_host_member(net):
                continue  # an endpoint's usual a.b.c.d/32: valid, no need to parse it twice
            if _plain(net):
                check_net(net)
            else:
                ipaddress.ip_network(net, strict=False)
        except ValueError:
            raise Invalid(f"{what}: bad CIDR {net!r}") from None


def _addrs(value: Iterable[str], what: str) -> None:
    for addr in value:
        try:
            if _plain(addr) and "/" not in addr:
                host_cidrs((addr,))
            else:
                ipaddress.ip_address(addr)
        except ValueError:
            raise Invalid(f"{what}: bad IP {addr!r}") from None


def _selector(value: str, what: str) -> None:
    if not value:
        return
    try:
        validate_selector(value)
    except SelectorParseError as exc:
        raise Invalid(f"{what}: {exc}") from None


def _ports(value: Iterable[int | str], what: str) -> None:
    for port in value:
        parsed = parse_port(port)
        if isinstance(parsed, str):
            _check(bool(parsed) and ":" not in parsed, f"{what}: bad port {port!r}")
        else:
            _check(0 <= parsed.first <= parsed.last <= 65535, f"{what}: bad range {port!r}")


def _rule(rule: v1.Rule) -> None:
    _check(rule.action in ACTIONS, f"unknown action {rule.action!r}")
    for side in ("src", "dst"):
        for prefix, label in (("", ""), ("not_", "!")):
            field = f"{prefix}{side}"
            _selector(getattr(rule, f"{field}_selector"), f"{label}{side}_selector")
            _nets(getattr(rule, f"{field}_nets"), f"{label}{side}_nets")
            _ports(getattr(rule, f"{field}_ports"), f"{label}{side}_ports")
    _check(rule.ip_version in (None, 4, 6), "ip_version must be 4 or 6")


def _rules(rules: Iterable[v1.Rule]) -> None:
    for rule in rules:
        _rule(rule)


def _policy(value: v1.Policy) -> None:
    _selector(value.selector, "selector")
    _check(all(t.lower() in POLICY_TYPES for t in value.types), f"bad types {value.types!r}")
    _rules(value.inbound_rules)
    _rules(value.outbound_rules)


def _workload(value: v1.WorkloadEndpoint, workload_source_spoofing: str) -> None:
    _check(bool(value.name), "workload endpoint has no interface name")
    _labels(value.labels)
    _nets(value.ipv4_nets, "ipv4_nets")
    _nets(value.ipv6_nets, "ipv6_nets")
    if value.allow_spoofed_source_ips:
        _check(workload_source_spoofing == "Any", "source spoofing is not allowed")


def _host(value: v1.HostEndpoint) -> None:
    _labels(value.labels)
    _addrs(value.expected_ipv4_addrs, "expected_ipv4_addrs")
    _addrs(value.expected_ipv6_addrs, "expected_ipv6_addrs")


def _tier(value: v1.Tier) -> None:
    action = value.default_action
    _check(action in ("", "Deny", "Pass"), f"bad defaultAction {action!r}")


def _network_set(value: v1.NetworkSet) -> None:
    _labels(value.labels)
    _nets(value.nets, "nets")


def _profile_rules(value: v1.ProfileRules) -> None:
    _rules(value.inbound_rules)
    _rules(value.outbound_rules)


def _profile_labels(value: v1.ProfileLabels) -> None:
    _labels(value.labels)


#: Key type -> (the value class it must carry, the semantic check).
_CHECKS: dict[type, tuple[type, Callable[..., None]]] = {
    WorkloadEndpointKey: (v1.WorkloadEndpoint, _workload),
    HostEndpointKey: (v1.HostEndpoint, _host),
    PolicyKey: (v1.Policy, _policy),
    ProfileRulesKey: (v1.ProfileRules, _profile_rules),
    ProfileLabelsKey: (v1.ProfileLabels, _profile_labels),
    TierKey: (v1.Tier, _tier),
    NetworkSetKey: (v1.NetworkSet, _network_set),
}


def validate(key: Any, value: Any, *, workload_source_spoofing: str = "Disabled") -> None:
    """Raise :class:`Invalid` if ``value`` must not reach the graph for ``key``.

    Only the value types the graph's rule and label machinery consume are checked; the types
    come from the update processors (or a wire decoder), so the checks are semantic: parsable
    selectors, real CIDRs and addresses, known actions, port ranges."""
    if value is None:
        return
    check = _CHECKS.get(type(key))
    if check is None:
        return
    cls, semantic = check
    _check(isinstance(value, cls), f"{type(key).__name__} value is not a {cls.__name__}")
    if cls is v1.WorkloadEndpoint:
        semantic(value, workload_source_spoofing)
    else:
        semantic(value)


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
