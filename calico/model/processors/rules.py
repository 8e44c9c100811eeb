"""v3 Rule -> v1 ``model.Rule`` JSON, as policies and profiles carry them to Felix.

Field names are upstream's model.Rule JSON tags; like Go's ``omitempty`` only set fields are
written. Selectors are fully rewritten (namespace/service-account context folded in, see
``selectors``); the original v3 selectors ride along in the ``orig_*`` fields for consumers
that need them (flow logs, ALP).
"""

from __future__ import annotations

from typing import Any

from calico.api.rules import EntityRule, Rule
from calico.model.processors.common import net_str, protocol_v1
from calico.model.processors.selectors import entity_selector, service_account_selector


def action_v1(action: str) -> str:
    """``Pass`` is stored as ``next-tier``; every other action lower-cased."""
    return "next-tier" if action == "Pass" else action.lower()


def _side(ent: EntityRule | None, side: str, namespace: str, out: dict[str, Any]) -> None:
    """Write the src_*/dst_* (and negated ``!``) fields of one side of the rule."""
    if ent is None:
        return
    sam = ent.service_accounts
    sa_sel = service_account_selector(sam.names, sam.selector) if sam else ""
    sel = entity_selector(ent.namespace_selector, ent.selector, sa_sel, ent.not_selector, namespace)
    fields: list[tuple[str, Any]] = [
        (f"{side}_nets", [net_str(n) for n in ent.nets or []]),
        (f"{side}_selector", sel),
        (f"{side}_ports", list(ent.ports or [])),
        (f"{side}_service", ent.services.name if ent.services else None),
        (f"{side}_service_ns", ent.services.namespace if ent.services else None),
        (f"!{side}_nets", [net_str(n) for n in ent.not_nets or []]),
        (f"!{side}_selector", ent.not_selector),
        (f"!{side}_ports", list(ent.not_ports or [])),
        (f"orig_{side}_selector", ent.selector),
        (f"orig_{side}_namespace_selector", ent.namespace_selector),
        (f"!orig_{side}_selector", ent.not_selector),
        (f"orig_{side}_service_acct_names", list(sam.names or []) if sam else None),
        (f"orig_{side}_service_acct_selector", sam.selector if sam else None),
    ]
    for name, value in fields:
        if value:
            out[name] = value


def rule_v1(rule: Rule, namespace: str = "") -> dict[str, Any]:
    """One v3 rule as model.Rule JSON; ``namespace`` is the policy's ("" for global kinds)."""
    out: dict[str, Any] = {"action": action_v1(rule.action)}
    if rule.ip_version is not None:
        out["ip_version"] = rule.ip_version
    if rule.protocol is not None:
        out["protocol"] = protocol_v1(rule.protocol)
    if rule.not_protocol is not None:
        out["!protocol"] = protocol_v1(rule.not_protocol)
    for prefix, icmp in (("", rule.icmp), ("!", rule.not_icmp)):
        if icmp is not None and icmp.type is not None:
            out[f"{prefix}icmp_type"] = icmp.type
        if icmp is not None and icmp.code is not None:
            out[f"{prefix}icmp_code"] = icmp.code
    _side(rule.source, "src", namespace, out)
    _side(rule.destination, "dst", namespace, out)
    if rule.http is not None:
        http: dict[str, Any] = {}
        if rule.http.methods:
            http["methods"] = list(rule.http.methods)
        if rule.http.paths:
            http["paths"] = [p.to_wire() for p in rule.http.paths]
        out["http"] = http
    if rule.metadata is not None and rule.metadata.annotations is not None:
        out["metadata"] = {"annotations": dict(rule.metadata.annotations)}
    return out


def rules_v1(rules: list[Rule] | None, namespace: str = "") -> list[dict[str, Any]]:
    return [rule_v1(r, namespace) for r in rules or []]
