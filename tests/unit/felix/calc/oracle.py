"""Test oracle for the calculation graph: the desired dataplane state computed from scratch.

:func:`desired_state` takes a full snapshot (v1 key -> v1 value) and recomputes everything with
plain loops and the *interpreted* selector evaluator: which policies and profiles are active,
their parsed rules, every IP set with its members, and each local endpoint's ordered tiers. It
shares only stateless conversions with the graph (validation, v1 rule -> Rule, v1 endpoint ->
message fields); matching, membership, reference counting and ordering are independent.

:class:`DataplaneState` applies an emitted message stream to an empty state the way a dataplane
would, and raises :class:`IntegrityError` the moment a message references an IP set, policy or
profile that was not sent before it (or removes something still in use).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from calico.felix.calc.policy_resolver import hep_id, host_message, wep_id, workload_message
from calico.felix.calc.rule_scanner import (
    IPSetData,
    is_staged,
    parse_policy,
    parse_profile,
    policy_id,
)
from calico.felix.calc.validation_filter import Invalid, validate
from calico.felix.messages import (
    ActivePolicyRemove,
    ActivePolicyUpdate,
    ActiveProfileRemove,
    ActiveProfileUpdate,
    HostEndpoint,
    HostEndpointID,
    HostEndpointRemove,
    HostEndpointUpdate,
    InSync,
    IPSetDeltaUpdate,
    IPSetRemove,
    IPSetType,
    IPSetUpdate,
    Policy,
    PolicyID,
    Profile,
    ProfileID,
    Rule,
    TierInfo,
    WorkloadEndpoint,
    WorkloadEndpointID,
    WorkloadEndpointRemove,
    WorkloadEndpointUpdate,
)
from calico.model import (
    HostEndpointKey,
    NetworkSetKey,
    PolicyKey,
    ProfileLabelsKey,
    ProfileRulesKey,
    TierKey,
    WorkloadEndpointKey,
)
from calico.selector import parse

ENDPOINT_MESSAGES = (
    WorkloadEndpointUpdate,
    WorkloadEndpointRemove,
    HostEndpointUpdate,
    HostEndpointRemove,
)


class IntegrityError(AssertionError):
    """A message referenced something the dataplane does not have (or broke set semantics)."""


# --- the dataplane side: apply messages ------------------------------------------------------


@dataclass
class DataplaneState:
    ipsets: dict[str, tuple[IPSetType, set[str]]] = field(default_factory=dict)
    policies: dict[PolicyID, Policy] = field(default_factory=dict)
    profiles: dict[ProfileID, Profile] = field(default_factory=dict)
    weps: dict[WorkloadEndpointID, WorkloadEndpoint] = field(default_factory=dict)
    heps: dict[HostEndpointID, HostEndpoint] = field(default_factory=dict)
    in_sync: bool = False

    def comparable(self) -> dict[str, Any]:
        return {
            "ipsets": {k: (t, frozenset(m)) for k, (t, m) in self.ipsets.items()},
            "policies": dict(self.policies),
            "profiles": dict(self.profiles),
            "weps": dict(self.weps),
            "heps": dict(self.heps),
        }

    def apply_all(self, messages: Iterable[Any]) -> None:
        for msg in messages:
            self.apply(msg)

    def apply(self, msg: Any) -> None:
        match msg:
            case IPSetUpdate(id=set_id, members=members, type=set_type):
                # Create or replace (a set removed and re-added within one batch arrives as a
                # single full update, as upstream's sequencer sends it).
                self.ipsets[set_id] = (set_type, set(members))
            case IPSetDeltaUpdate(id=set_id, added_members=added, removed_members=removed):
                _require(set_id in self.ipsets, f"delta for unknown IP set {set_id}")
                members = self.ipsets[set_id][1]
                for m in removed:
                    _require(m in members, f"removing absent member {m} of {set_id}")
                    members.discard(m)
                for m in added:
                    _require(m not in members, f"adding present member {m} to {set_id}")
                    members.add(m)
            case IPSetRemove(id=set_id):
                _require(set_id in self.ipsets, f"removing unknown IP set {set_id}")
                _require(set_id not in self._referenced_sets(), f"removing used IP set {set_id}")
                del self.ipsets[set_id]
            case ActivePolicyUpdate(id=pid, policy=policy):
                self._check_sets(policy.inbound_rules + policy.outbound_rules, pid)
                self.policies[pid] = policy
            case ActivePolicyRemove(id=pid):
                _require(pid in self.policies, f"removing unknown policy {pid}")
                _require(pid not in self._referenced_policies(), f"removing used policy {pid}")
                del self.policies[pid]
            case ActiveProfileUpdate(id=pid, profile=profile):
                self._check_sets(profile.inbound_rules + profile.outbound_rules, pid)
                self.profiles[pid] = profile
            case ActiveProfileRemove(id=pid):
                _require(pid in self.profiles, f"removing unknown profile {pid}")
                _require(pid.name not in self._referenced_profiles(), f"removing used {pid}")
                del self.profiles[pid]
            case WorkloadEndpointUpdate(id=eid, endpoint=ep):
                self._check_endpoint(ep.tiers, ep.profile_ids, eid)
                self.weps[eid] = ep
            case WorkloadEndpointRemove(id=eid):
                _require(eid in self.weps, f"removing unknown endpoint {eid}")
                del self.weps[eid]
            case HostEndpointUpdate(id=eid, endpoint=ep):
                tiers = ep.tiers + ep.untracked_tiers + ep.pre_dnat_tiers + ep.forward_tiers
                self._check_endpoint(tiers, ep.profile_ids, eid)
                self.heps[eid] = ep
            case HostEndpointRemove(id=eid):
                _require(eid in self.heps, f"removing unknown host endpoint {eid}")
                del self.heps[eid]
            case InSync():
                self.in_sync = True
            case _:
                pass  # config, routes, pools...: not part of this state

    def _check_sets(self, rules: tuple[Rule, ...], owner: Any) -> None:
        for set_id in rule_set_ids(rules):
            _require(set_id in self.ipsets, f"{owner} references unknown IP set {set_id}")

    def _check_endpoint(self, tiers: tuple[TierInfo, ...], profiles: tuple[str, ...], eid: Any):
        for tier in tiers:
            for pid in tier.ingress_policies + tier.egress_policies:
                _require(pid in self.policies, f"{eid} references unknown policy {pid}")
        for name in profiles:
            _require(ProfileID(name) in self.profiles, f"{eid} references unknown profile {name}")

    def _referenced_sets(self) -> set[str]:
        out: set[str] = set()
        for p in self.policies.values():
            out |= rule_set_ids(p.inbound_rules + p.outbound_rules)
        for pr in self.profiles.values():
            out |= rule_set_ids(pr.inbound_rules + pr.outbound_rules)
        return out

    def _referenced_policies(self) -> set[PolicyID]:
        out: set[PolicyID] = set()
        tier_lists = [ep.tiers for ep in self.weps.values()] + [
            ep.tiers + ep.untracked_tiers + ep.pre_dnat_tiers + ep.forward_tiers
            for ep in self.heps.values()
        ]
        for tiers in tier_lists:
            for tier in tiers:
                out.update(tier.ingress_policies + tier.egress_policies)
        return out

    def _referenced_profiles(self) -> set[str]:
        out: set[str] = set()
        for ep in [*self.weps.values(), *self.heps.values()]:
            out.update(ep.profile_ids)
        return out


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise IntegrityError(message)


def rule_set_ids(rules: Iterable[Rule]) -> set[str]:
    out: set[str] = set()
    for r in rules:
        for ids in (
            r.src_ip_set_ids,
            r.src_named_port_ip_set_ids,
            r.src_ip_port_set_ids,
            r.dst_ip_set_ids,
            r.dst_named_port_ip_set_ids,
            r.dst_ip_port_set_ids,
            r.not_src_ip_set_ids,
            r.not_src_named_port_ip_set_ids,
            r.not_dst_ip_set_ids,
            r.not_dst_named_port_ip_set_ids,
        ):
            out.update(ids)
    return out


# --- the oracle: desired state from a snapshot --------------------------------------------------


def _valid(snapshot: Mapping[Any, Any]) -> dict[Any, Any]:
    out = {}
    for key, value in snapshot.items():
        if value is None:
            continue
        try:
            validate(key, value)
        except Invalid:
            continue
        out[key] = value
    return out


def _labels(value: Any, profile_labels: Mapping[str, Mapping[str, str]]):
    """Own labels over profile labels; among profiles the first listed wins."""
    merged: dict[str, str] = {}
    for name in value.profile_ids:
        for k, v in (profile_labels.get(name) or {}).items():
            merged.setdefault(k, v)
    merged.update(value.labels)
    return merged


def _host(addr: str) -> str:
    ip = ipaddress.ip_address(addr.split("/")[0])
    return f"{ip}/{32 if ip.version == 4 else 128}"


def _item_nets(key: Any, value: Any) -> list[str]:
    if isinstance(key, WorkloadEndpointKey):
        return [_host(a) for a in [*value.ipv4_nets, *value.ipv6_nets]]
    if isinstance(key, HostEndpointKey):
        return [_host(a) for a in [*value.expected_ipv4_addrs, *value.expected_ipv6_addrs]]
    out = []
    for net in value.nets:
        n = ipaddress.ip_network(net, strict=False)
        if n.prefixlen == 0:
            out.extend(str(s) for s in n.subnets(new_prefix=1))
        else:
            out.append(str(n))
    return out


def _port_proto(protocol: Any) -> str:
    text = {"6": "tcp", "17": "udp", "132": "sctp"}.get(
        str(protocol).lower(), str(protocol).lower()
    )
    return text if text in ("tcp", "udp", "sctp") else "tcp"


def _members(data: IPSetData, items: list[tuple[Any, dict[str, str], Any]]):
    if data.service:
        return set()
    sel = parse(data.selector)
    out: set[str] = set()
    for key, labels, value in items:
        if not sel.evaluate_interpreted(labels):
            continue
        nets = _item_nets(key, value)
        if data.named_port is None:
            out.update(nets)
            continue
        for port in getattr(value, "ports", ()):
            if port.name != data.named_port:
                continue
            proto = _port_proto(port.protocol or "")
            if proto != data.named_port_protocol:
                continue
            for net in nets:
                out.add(f"{net.split('/')[0]},{proto}:{port.port}")
    return out


def _tier_sort_key(name: str, tiers: Mapping[str, Any]):
    tier = tiers.get(name)
    if tier is None:
        return (1, 1, 0.0, name)
    order = tier.order
    return (0, 1 if order is None else 0, 0.0 if order is None else float(order), name)


def _endpoint_tiers(
    matched: list[PolicyKey],
    policies: Mapping[PolicyKey, Any],
    tiers: Mapping[str, Any],
) -> tuple[tuple[TierInfo, ...], ...]:
    by_tier: dict[str, list[PolicyKey]] = {}
    for key in matched:
        by_tier.setdefault(policies[key].tier or "default", []).append(key)
    normal: list[TierInfo] = []
    untracked: list[TierInfo] = []
    pre_dnat: list[TierInfo] = []
    forward: list[TierInfo] = []
    for name in sorted(by_tier, key=lambda n: _tier_sort_key(n, tiers)):
        tier = tiers.get(name)
        action = "Pass" if tier is not None and tier.default_action == "Pass" else "Deny"

        def order(k: PolicyKey) -> tuple[float, str]:
            o = policies[k].order
            return (math.inf if o is None else float(o), f"{k.name}/{k.namespace}/{k.kind}")

        lists: dict[str, tuple[list[PolicyID], list[PolicyID]]] = {
            n: ([], []) for n in ("normal", "untracked", "pre_dnat", "forward")
        }
        for key in sorted(by_tier[name], key=order):
            pol = policies[key]
            types = [t.lower() for t in pol.types]
            ing = not types or "ingress" in types
            egr = not types or "egress" in types
            pid = policy_id(key)
            targets: list[tuple[str, bool, bool]] = []
            if pol.untracked:
                targets.append(("untracked", ing, egr))
            elif pol.pre_dnat:
                targets.append(("pre_dnat", ing, False))
            else:
                targets.append(("normal", ing, egr))
                if pol.apply_on_forward:
                    targets.append(("forward", ing, egr))
            for list_name, i, e in targets:
                if i:
                    lists[list_name][0].append(pid)
                if e:
                    lists[list_name][1].append(pid)
        for list_name, acc, act in (
            ("normal", normal, action),
            ("untracked", untracked, "Pass"),
            ("pre_dnat", pre_dnat, "Pass"),
            ("forward", forward, action),
        ):
            ing_ids, egr_ids = lists[list_name]
            if ing_ids or egr_ids:
                acc.append(TierInfo(name, tuple(ing_ids), tuple(egr_ids), act))
    return tuple(normal), tuple(untracked), tuple(pre_dnat), tuple(forward)


def desired_state(snapshot: Mapping[Any, Any], hostname: str) -> DataplaneState:
    """Everything the dataplane should hold once the graph has processed ``snapshot``."""
    snap = _valid(snapshot)
    profile_labels = {k.name: v.labels for k, v in snap.items() if isinstance(k, ProfileLabelsKey)}
    profile_rules = {k.name: v for k, v in snap.items() if isinstance(k, ProfileRulesKey)}
    tiers = {k.name: v for k, v in snap.items() if isinstance(k, TierKey)}
    policies = {k: v for k, v in snap.items() if isinstance(k, PolicyKey)}
    items = [
        (k, _labels(v, profile_labels), v)
        for k, v in snap.items()
        if isinstance(k, WorkloadEndpointKey | HostEndpointKey | NetworkSetKey)
    ]
    local = [
        (k, labels, v)
        for k, labels, v in items
        if isinstance(k, WorkloadEndpointKey | HostEndpointKey) and k.hostname == hostname
    ]

    state = DataplaneState(in_sync=True)
    matches: dict[Any, list[PolicyKey]] = {k: [] for k, _l, _v in local}
    needed_sets: dict[str, IPSetData] = {}
    for pkey, pol in policies.items():
        sel = parse(pol.selector)
        matched = [k for k, labels, _v in local if sel.evaluate_interpreted(labels)]
        for k in matched:
            matches[k].append(pkey)
        hinted = "AssumeNeededOnEveryNode" in pol.performance_hints
        if matched or hinted:
            policy, sets = parse_policy(pkey, pol)
            assert policy.staged == is_staged(pkey.kind)
            state.policies[policy_id(pkey)] = policy
            needed_sets.update((s.id, s) for s in sets)
    for name in {p for _k, _l, v in local for p in v.profile_ids}:
        profile, sets = parse_profile(name, profile_rules.get(name))
        state.profiles[ProfileID(name)] = profile
        needed_sets.update((s.id, s) for s in sets)
    for set_id, data in needed_sets.items():
        state.ipsets[set_id] = (data.type, _members(data, items))
    for key, _, value in local:
        normal, untracked, pre_dnat, forward = _endpoint_tiers(matches[key], policies, tiers)
        if isinstance(key, WorkloadEndpointKey):
            state.weps[wep_id(key)] = workload_message(value, normal)
        else:
            state.heps[hep_id(key)] = host_message(value, normal, untracked, pre_dnat, forward)
    return state
