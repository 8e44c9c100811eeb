"""RuleScanner: active policies/profiles -> parsed rules (selectors replaced by IP set IDs) and
reference-counted IP sets.

Selector handling follows upstream (felix/calc/rule_scanner.go):

* a negated selector is folded into the positive one as ``(pos) && (!(neg))`` when a positive
  selector exists (the rule can then only match known endpoints anyway); otherwise the negated
  selector gets a set of its own;
* each named port (in ``ports`` or ``notPorts``) becomes an IP_AND_PORT set keyed by (positive
  selector or ``all()``, protocol, port name); the protocol is the rule's (TCP unless it is
  UDP/SCTP);
* when a side has named ports but no numeric ports, its plain selector set is skipped: the
  named-port set already filters by the selector;
* ``dst_service`` -> a ``svc:`` IP_AND_PORT set, ``src_service`` -> a ``svcnoport:`` NET set,
  whose members come from the ServiceIndex (EndpointSlices; Kubernetes datastore only).

An IP set is announced (``on_ipset_added`` then the label index's ``update_ip_set``) when the
first active rule references it and withdrawn (index first, then ``on_ipset_removed``) when the
last reference goes, so the sequencer always sees the set before any member event.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from calico.felix.calc.callbacks import RuleCallbacks
from calico.felix.calc.rule_convert import (
    POLICY_INBOUND_SEED,
    POLICY_OUTBOUND_SEED,
    PROFILE_INBOUND_SEED,
    PROFILE_OUTBOUND_SEED,
    deny_all_rules,
    rule_fields,
    rules_with_ids,
    split_ports,
    with_rule_ids,
)
from calico.felix.messages import IPSetType, Policy, PolicyID, Profile, ProfileID, Rule
from calico.model import PolicyKey
from calico.model import values as v1
from calico.policyeval.ordering import is_staged
from calico.policyeval.rulesem import combine_selectors, named_port_protocol
from calico.selector import make_unique_id, parse

log = logging.getLogger(__name__)

ALL_SELECTOR = "all()"


@dataclass(frozen=True, slots=True)
class IPSetData:
    """What one IP set selects. Equal data <=> equal ID."""

    selector: str = ""  # canonical form; "" only for service sets
    named_port_protocol: str | None = None  # tcp | udp | sctp for named-port sets
    named_port: str | None = None
    service: str = ""  # "<ns>/<name>" for svc:/svcnoport: sets
    service_include_ports: bool = False

    @property
    def id(self) -> str:
        if self.service:
            prefix = "svc" if self.service_include_ports else "svcnoport"
            return make_unique_id(prefix, self.service)
        sel_id = parse(self.selector).unique_id
        if self.named_port is None:
            return sel_id
        return make_unique_id("n", f"{sel_id},{self.named_port_protocol},{self.named_port}")

    @property
    def type(self) -> IPSetType:
        if self.service:
            return IPSetType.IP_AND_PORT if self.service_include_ports else IPSetType.NET
        return IPSetType.NET if self.named_port is None else IPSetType.IP_AND_PORT


def _canonical(selector: str) -> str:
    return parse(selector).canonical


def scan_rule(rule: v1.Rule) -> tuple[Rule, list[IPSetData]]:
    """One v1 rule -> (Rule without ID, the IP sets it references, in a stable order)."""
    fields, sets = scan_rule_fields(rule)
    return Rule(**fields), sets


def scan_rule_fields(rule: v1.Rule) -> tuple[dict[str, Any], list[IPSetData]]:
    """:func:`scan_rule` with the Rule as its fields (``rule_fields``), not yet built."""
    proto = named_port_protocol(rule.protocol)
    ids: dict[str, list[str]] = {}
    all_sets: list[IPSetData] = []

    def add(field: str, data: IPSetData) -> None:
        ids.setdefault(field, []).append(data.id)
        all_sets.append(data)

    for side in ("src", "dst"):
        positive, negated = combine_selectors(
            getattr(rule, f"{side}_selector"), getattr(rule, f"not_{side}_selector")
        )
        pos = _canonical(positive) if positive else ""
        numeric, named = split_ports(getattr(rule, f"{side}_ports"))
        _not_numeric, not_named = split_ports(getattr(rule, f"not_{side}_ports"))
        port_sel = pos or ALL_SELECTOR
        for port in named:
            add(f"{side}_named_port_ip_set_ids", IPSetData(port_sel, proto, port))
        for port in not_named:
            add(f"not_{side}_named_port_ip_set_ids", IPSetData(port_sel, proto, port))
        if pos and (numeric or not named):
            add(f"{side}_ip_set_ids", IPSetData(pos))
        if negated:
            add(f"not_{side}_ip_set_ids", IPSetData(_canonical(negated)))
    if rule.dst_service:
        svc = f"{rule.dst_service_ns}/{rule.dst_service}"
        add("dst_ip_port_set_ids", IPSetData(service=svc, service_include_ports=True))
    if rule.src_service:
        svc = f"{rule.src_service_ns}/{rule.src_service}"
        add("src_ip_set_ids", IPSetData(service=svc))
    return rule_fields(rule, ids), all_sets


def scan_rules(rules: Sequence[v1.Rule], seed: str) -> tuple[tuple[Rule, ...], list[IPSetData]]:
    """A rule list -> (Rules with IDs, every IP set referenced). Equal to ``with_rule_ids`` of
    the :func:`scan_rule` results (tested); each Rule is built once, with its ID."""
    out: list[dict[str, Any]] = []
    sets: list[IPSetData] = []
    for rule in rules:
        fields, rule_sets = scan_rule_fields(rule)
        out.append(fields)
        sets.extend(rule_sets)
    return rules_with_ids(out, seed), sets


def policy_id(key: PolicyKey) -> PolicyID:
    """The dataplane ID of a policy: its key (the tier travels in ``Policy.tier``)."""
    return PolicyID(name=key.name, kind=key.kind, namespace=key.namespace)


def parse_policy(key: PolicyKey, value: v1.Policy) -> tuple[Policy, list[IPSetData]]:
    """A v1 policy -> (Policy message, the IP sets its rules use)."""
    inbound, in_sets = scan_rules(value.inbound_rules, POLICY_INBOUND_SEED.format(name=key.name))
    outbound, out_sets = scan_rules(
        value.outbound_rules, POLICY_OUTBOUND_SEED.format(name=key.name)
    )
    policy = Policy(
        namespace=value.namespace,
        inbound_rules=inbound,
        outbound_rules=outbound,
        untracked=value.untracked,
        pre_dnat=value.pre_dnat,
        apply_on_forward=value.apply_on_forward,
        original_selector=value.selector,
        staged=is_staged(key.kind),
        tier=value.tier or "default",
    )
    return policy, in_sets + out_sets


def parse_profile(name: str, value: v1.ProfileRules | None) -> tuple[Profile, list[IPSetData]]:
    """A v1 profile's rules -> (Profile, IP sets); ``None`` (missing) -> the deny-all profile."""
    if value is None:
        return Profile(
            inbound_rules=with_rule_ids(deny_all_rules(), PROFILE_INBOUND_SEED.format(name=name)),
            outbound_rules=with_rule_ids(deny_all_rules(), PROFILE_OUTBOUND_SEED.format(name=name)),
        ), []
    inbound, in_sets = scan_rules(value.inbound_rules, PROFILE_INBOUND_SEED.format(name=name))
    outbound, out_sets = scan_rules(value.outbound_rules, PROFILE_OUTBOUND_SEED.format(name=name))
    return Profile(inbound_rules=inbound, outbound_rules=outbound), in_sets + out_sets


class IPSetIndex(Protocol):
    """The label index's IP set interface (SelectorAndNamedPortIndex)."""

    def update_ip_set(
        self,
        set_id: str,
        selector: Any,
        named_port_protocol: str | None = None,
        named_port: str | None = None,
    ) -> None: ...
    def delete_ip_set(self, set_id: str) -> None: ...


class ServiceSetIndex(Protocol):
    """The service index's IP set interface (ServiceIndex)."""

    def update_ip_set(self, set_id: str, service: str, include_ports: bool) -> None: ...
    def delete_ip_set(self, set_id: str) -> None: ...


#: Parsed policies kept per key (active or not) so a policy that goes inactive and comes back
#: at the same revision is not parsed again; least recently activated dropped first.
PARSED_POLICY_CACHE = 1024


class RuleScanner:
    """Turns ARC's active/inactive events into parsed rules and IP set lifecycles.

    ``parse_policy`` is a pure function of (key, value), so its result is kept per key with the
    value it was parsed from and reused while an activation brings an equal value (the ARC
    hands over the object it stores, so usually the same one). The same Policy object then
    reaches the dataplane, whose PolicyManager keeps rendered chains the same way.
    """

    def __init__(
        self, callbacks: RuleCallbacks, index: IPSetIndex, services: ServiceSetIndex | None = None
    ) -> None:
        self._callbacks = callbacks
        self._index = index
        self._services = services
        self._sets_by_owner: dict[object, frozenset[str]] = {}
        self._owners_by_set: dict[str, set[object]] = {}
        self._data_by_set: dict[str, IPSetData] = {}
        self._parsed: OrderedDict[PolicyKey, tuple[v1.Policy, Policy, list[IPSetData]]] = (
            OrderedDict()
        )

    @property
    def active_ip_sets(self) -> Mapping[str, IPSetData]:
        return self._data_by_set

    # -- called by the ActiveRulesCalculator -------------------------------------------------

    def on_policy_active(self, key: PolicyKey, value: v1.Policy) -> None:
        """Called when a policy becomes active or an active policy changes."""
        policy, sets = self._parse(key, value)
        self._update_refs(key, sets)
        self._callbacks.on_policy_active(policy_id(key), policy)

    def prepare(self, key: PolicyKey, value: v1.Policy) -> tuple[PolicyID, Policy] | None:
        """Parse an inactive policy into the cache ahead of its activation, behind every
        entry (the first to be dropped): no IP set is referenced and no callback made. None
        if it is cached at this value already or the cache has no room (a guess never
        evicts what a real activation parsed)."""
        cached = self._parsed.get(key)
        if cached is not None and (cached[0] is value or cached[0] == value):
            return None
        if cached is None and len(self._parsed) >= PARSED_POLICY_CACHE:
            return None
        policy, sets = parse_policy(key, value)
        self._parsed[key] = (value, policy, sets)
        self._parsed.move_to_end(key, last=False)
        return policy_id(key), policy

    @property
    def prepare_room(self) -> int:
        """How many more policies :meth:`prepare` can cache without dropping any."""
        return max(PARSED_POLICY_CACHE - len(self._parsed), 0)

    def on_policy_inactive(self, key: PolicyKey) -> None:
        """Called when a policy stops being active (deleted or no longer matching)."""
        self._callbacks.on_policy_inactive(policy_id(key))
        self._update_refs(key, [])

    def on_profile_active(self, name: str, value: v1.ProfileRules | None) -> None:
        """Called when a profile becomes active or changes; ``None`` = missing (deny-all)."""
        profile, sets = parse_profile(name, value)
        self._update_refs(("profile", name), sets)
        self._callbacks.on_profile_active(ProfileID(name), profile)

    def on_profile_inactive(self, name: str) -> None:
        self._callbacks.on_profile_inactive(ProfileID(name))
        self._update_refs(("profile", name), [])

    def _parse(self, key: PolicyKey, value: v1.Policy) -> tuple[Policy, list[IPSetData]]:
        cached = self._parsed.get(key)
        if cached is not None and (cached[0] is value or cached[0] == value):
            self._parsed.move_to_end(key)
            return cached[1], cached[2]
        policy, sets = parse_policy(key, value)
        self._parsed[key] = (value, policy, sets)
        self._parsed.move_to_end(key)
        if len(self._parsed) > PARSED_POLICY_CACHE:
            self._parsed.popitem(last=False)
        return policy, sets

    # -- reference counting --------------------------------------------------------------------

    def _update_refs(self, owner: object, sets: Sequence[IPSetData]) -> None:
        new = {s.id: s for s in sets}
        old = self._sets_by_owner.get(owner, frozenset())
        for set_id, data in new.items():
            if set_id in old:
                continue
            owners = self._owners_by_set.setdefault(set_id, set())
            if not owners:
                self._data_by_set[set_id] = data
                self._callbacks.on_ipset_added(set_id, data.type)
                if not data.service:
                    self._index.update_ip_set(
                        set_id, parse(data.selector), data.named_port_protocol, data.named_port
                    )
                elif self._services is not None:
                    self._services.update_ip_set(set_id, data.service, data.service_include_ports)
            owners.add(owner)
        for set_id in old - new.keys():
            owners = self._owners_by_set[set_id]
            owners.discard(owner)
            if not owners:
                del self._owners_by_set[set_id]
                data = self._data_by_set.pop(set_id)
                if not data.service:
                    self._index.delete_ip_set(set_id)
                elif self._services is not None:
                    self._services.delete_ip_set(set_id)
                self._callbacks.on_ipset_removed(set_id)
        if new:
            self._sets_by_owner[owner] = frozenset(new)
        else:
            self._sets_by_owner.pop(owner, None)
