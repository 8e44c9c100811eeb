"""v1 policy-side values: rules, policies, tiers and profile rules (upstream ``backend/model``
Rule, Policy, Tier, ProfileRules).

A rule's selectors are already rewritten by the update processors (namespace and service
account context folded in); the ``orig_*`` fields keep the v3 originals for consumers that
report them (flow logs). Field names follow upstream's JSON tags with ``!`` spelled ``not_``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from calico.model.values.codec import (
    V1Value,
    flag,
    items,
    nested,
    opt_int_or_text,
    opt_integer,
    opt_number,
    opt_text,
    port_list,
    string_map,
    text,
    texts,
)


@dataclass(frozen=True, slots=True)
class HTTPPath(V1Value):
    """One HTTP path match: exactly one of ``exact`` and ``prefix`` is set."""

    exact: str = text("exact", omitempty=True)
    prefix: str = text("prefix", omitempty=True)


@dataclass(frozen=True, slots=True)
class HTTPMatch(V1Value):
    methods: tuple[str, ...] = texts("methods", omitempty=True)
    paths: tuple[HTTPPath, ...] = items("paths", HTTPPath, omitempty=True)


@dataclass(frozen=True, slots=True)
class RuleMetadata(V1Value):
    annotations: Mapping[str, str] = string_map("annotations")


@dataclass(frozen=True, slots=True)
class Rule(V1Value):
    """One v1 rule. A missing ``action`` means allow, as upstream's rule conversion reads it."""

    action: str = text("action", default="allow")
    ip_version: int | None = opt_integer("ip_version")
    protocol: int | str | None = opt_int_or_text("protocol")
    not_protocol: int | str | None = opt_int_or_text("!protocol")
    icmp_type: int | None = opt_integer("icmp_type")
    icmp_code: int | None = opt_integer("icmp_code")
    not_icmp_type: int | None = opt_integer("!icmp_type")
    not_icmp_code: int | None = opt_integer("!icmp_code")

    src_nets: tuple[str, ...] = texts("src_nets", omitempty=True)
    src_selector: str = text("src_selector", omitempty=True)
    src_ports: tuple[int | str, ...] = port_list("src_ports")
    src_service: str = text("src_service", omitempty=True)
    src_service_ns: str = text("src_service_ns", omitempty=True)
    dst_nets: tuple[str, ...] = texts("dst_nets", omitempty=True)
    dst_selector: str = text("dst_selector", omitempty=True)
    dst_ports: tuple[int | str, ...] = port_list("dst_ports")
    dst_service: str = text("dst_service", omitempty=True)
    dst_service_ns: str = text("dst_service_ns", omitempty=True)

    not_src_nets: tuple[str, ...] = texts("!src_nets", omitempty=True)
    not_src_selector: str = text("!src_selector", omitempty=True)
    not_src_ports: tuple[int | str, ...] = port_list("!src_ports")
    not_dst_nets: tuple[str, ...] = texts("!dst_nets", omitempty=True)
    not_dst_selector: str = text("!dst_selector", omitempty=True)
    not_dst_ports: tuple[int | str, ...] = port_list("!dst_ports")

    orig_src_selector: str = text("orig_src_selector", omitempty=True)
    orig_dst_selector: str = text("orig_dst_selector", omitempty=True)
    orig_src_namespace_selector: str = text("orig_src_namespace_selector", omitempty=True)
    orig_dst_namespace_selector: str = text("orig_dst_namespace_selector", omitempty=True)
    orig_not_src_selector: str = text("!orig_src_selector", omitempty=True)
    orig_not_dst_selector: str = text("!orig_dst_selector", omitempty=True)
    orig_src_service_acct_names: tuple[str, ...] = texts(
        "orig_src_service_acct_names", omitempty=True
    )
    orig_src_service_acct_selector: str = text("orig_src_service_acct_selector", omitempty=True)
    orig_dst_service_acct_names: tuple[str, ...] = texts(
        "orig_dst_service_acct_names", omitempty=True
    )
    orig_dst_service_acct_selector: str = text("orig_dst_service_acct_selector", omitempty=True)

    http: HTTPMatch | None = nested("http", HTTPMatch)
    metadata: RuleMetadata | None = nested("metadata", RuleMetadata)


@dataclass(frozen=True, slots=True)
class Policy(V1Value):
    """``/calico/v1/policy/<kind>/<ns>/<name>``: any policy kind, staged ones included."""

    namespace: str = text("namespace", omitempty=True)
    tier: str = text("tier", omitempty=True)
    order: float | None = opt_number("order")
    inbound_rules: tuple[Rule, ...] = items("inbound_rules", Rule, omitempty=True)
    outbound_rules: tuple[Rule, ...] = items("outbound_rules", Rule, omitempty=True)
    selector: str = text("selector")
    untracked: bool = flag("untracked", omitempty=True)
    pre_dnat: bool = flag("pre_dnat", omitempty=True)
    apply_on_forward: bool = flag("apply_on_forward", omitempty=True)
    types: tuple[str, ...] = texts("types", omitempty=True)
    performance_hints: tuple[str, ...] = texts("performance_hints", omitempty=True)
    staged_action: str | None = opt_text("staged_action", omitempty=True)


@dataclass(frozen=True, slots=True)
class Tier(V1Value):
    """``/calico/v1/policy/tier/<name>/metadata``; a missing order sorts the tier last."""

    order: float | None = opt_number("order")
    default_action: str = text("defaultAction", omitempty=True)


@dataclass(frozen=True, slots=True)
class ProfileRules(V1Value):
    """``/calico/v1/policy/profile/<name>/rules``."""

    inbound_rules: tuple[Rule, ...] = items("inbound_rules", Rule, nil=[])
    outbound_rules: tuple[Rule, ...] = items("outbound_rules", Rule, nil=[])
