"""v3 Rule -> v1 ``model.Rule``, as policies and profiles carry them to Felix.

Selectors are fully rewritten (namespace/service-account context folded in, see
``selectors``); the original v3 selectors ride along in the ``orig_*`` fields for consumers
that need them (flow logs, ALP).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from calico.model import values as v1
from calico.model.processors.common import net_str, protocol_v1
from calico.model.processors.selectors import entity_selector, service_account_selector

if TYPE_CHECKING:  # annotations only: lean readers pass views with the same attributes
    from calico.api.rules import EntityRule, Rule


def action_v1(action: str) -> str:
    """``Pass`` is stored as ``next-tier``; every other action lower-cased."""
    return "next-tier" if action == "Pass" else action.lower()


def _side(ent: EntityRule | None, side: str, namespace: str) -> dict[str, Any]:
    """The src_*/dst_* (and negated) fields of one side of the rule, as Rule keywords."""
    if ent is None:
        return {}
    sam = ent.service_accounts
    sa_sel = service_account_selector(sam.names, sam.selector) if sam else ""
    sel = entity_selector(ent.namespace_selector, ent.selector, sa_sel, ent.not_selector, namespace)
    return {
        f"{side}_nets": tuple(net_str(n) for n in ent.nets or ()),
        f"{side}_selector": sel,
        f"{side}_ports": tuple(ent.ports or ()),
        f"{side}_service": ent.services.name if ent.services else "",
        f"{side}_service_ns": (ent.services.namespace or "") if ent.services else "",
        f"not_{side}_nets": tuple(net_str(n) for n in ent.not_nets or ()),
        f"not_{side}_selector": ent.not_selector or "",
        f"not_{side}_ports": tuple(ent.not_ports or ()),
        f"orig_{side}_selector": ent.selector or "",
        f"orig_{side}_namespace_selector": ent.namespace_selector or "",
        f"orig_not_{side}_selector": ent.not_selector or "",
        f"orig_{side}_service_acct_names": tuple(sam.names or ()) if sam else (),
        f"orig_{side}_service_acct_selector": (sam.selector or "") if sam else "",
    }


def rule_v1(rule: Rule, namespace: str = "") -> v1.Rule:
    """One v3 rule as a v1 Rule; ``namespace`` is the policy's ("" for global kinds)."""
    icmp, not_icmp = rule.icmp, rule.not_icmp
    http = None
    if rule.http is not None:
        http = v1.HTTPMatch(
            methods=tuple(rule.http.methods or ()),
            paths=tuple(
                v1.HTTPPath(exact=p.exact or "", prefix=p.prefix or "")
                for p in rule.http.paths or ()
            ),
        )
    metadata = None
    if rule.metadata is not None and rule.metadata.annotations is not None:
        metadata = v1.RuleMetadata(dict(rule.metadata.annotations))
    return v1.Rule(
        action=action_v1(rule.action),
        ip_version=rule.ip_version,
        protocol=protocol_v1(rule.protocol) if rule.protocol is not None else None,
        not_protocol=protocol_v1(rule.not_protocol) if rule.not_protocol is not None else None,
        icmp_type=icmp.type if icmp is not None else None,
        icmp_code=icmp.code if icmp is not None else None,
        not_icmp_type=not_icmp.type if not_icmp is not None else None,
        not_icmp_code=not_icmp.code if not_icmp is not None else None,
        **_side(rule.source, "src", namespace),
        **_side(rule.destination, "dst", namespace),
        http=http,
        metadata=metadata,
    )


def rules_v1(rules: list[Rule] | None, namespace: str = "") -> tuple[v1.Rule, ...]:
    return tuple(rule_v1(r, namespace) for r in rules or [])
