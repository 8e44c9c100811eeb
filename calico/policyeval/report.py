"""The three explain questions as plain data (the CLI renders them as text, YAML or JSON):
why a connection is allowed or denied, which policies select an endpoint, and what a policy
selects (design/explain.md).
"""

from __future__ import annotations

from typing import Any

from calico.model import PolicyKey
from calico.policyeval.dataset import Dataset, Endpoint, PolicyEntry, selector
from calico.policyeval.evaluate import ALL_SELECTOR, Evaluator, Packet, SideResult
from calico.policyeval.ordering import is_staged
from calico.policyeval.rulesem import combine_selectors


def _overall(egress: SideResult, ingress: SideResult) -> dict[str, Any]:
    if egress.verdict != "Allow":
        return {"verdict": "Deny", "deniedAt": "egress", "endpoint": egress.endpoint}
    if ingress.verdict != "Allow":
        return {"verdict": "Deny", "deniedAt": "ingress", "endpoint": ingress.endpoint}
    return {"verdict": "Allow"}


def packet_dict(pkt: Packet, protocol_name: str) -> dict[str, Any]:
    out: dict[str, Any] = {"protocol": protocol_name, "source": str(pkt.src)}
    out["destination"] = str(pkt.dst)
    if pkt.src_port is not None:
        out["sourcePort"] = pkt.src_port
    if pkt.dst_port is not None:
        out["destinationPort"] = pkt.dst_port
    if pkt.icmp_type is not None:
        out["icmpType"] = pkt.icmp_type
        out["icmpCode"] = pkt.icmp_code
    return out


def explain_connection(
    data: Dataset, src: Endpoint | None, dst: Endpoint | None, pkt: Packet, protocol_name: str
) -> dict[str, Any]:
    """Source egress then destination ingress, enforced; and the staged (would-be) view."""
    ev = Evaluator(data)
    egress = ev.evaluate_side(src, False, pkt)
    ingress = ev.evaluate_side(dst, True, pkt)
    s_egress = ev.evaluate_side(src, False, pkt, staged=True)
    s_ingress = ev.evaluate_side(dst, True, pkt, staged=True)
    return {
        "packet": packet_dict(pkt, protocol_name),
        "egress": egress.to_dict(),
        "ingress": ingress.to_dict(),
        "result": _overall(egress, ingress),
        "staged": {
            "enforced": False,
            "egress": s_egress.to_dict(),
            "ingress": s_ingress.to_dict(),
            "result": _overall(s_egress, s_ingress),
        },
    }


def _policy_ref(entry: PolicyEntry) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": entry.key.kind, "name": entry.key.name}
    if entry.key.namespace:
        out["namespace"] = entry.key.namespace
    out["tier"] = entry.meta.tier
    out["order"] = None if entry.meta.order == float("inf") else entry.meta.order
    out["selector"] = entry.value.selector or ALL_SELECTOR
    if is_staged(entry.key.kind):
        out["staged"] = True
    return out


def endpoint_policies(data: Dataset, ep: Endpoint) -> dict[str, Any]:
    """The ordered ingress and egress policies selecting ``ep`` (enforced, then staged)."""
    ev = Evaluator(data)
    out: dict[str, Any] = {"endpoint": ep.display, "labels": dict(sorted(ep.labels.items()))}
    for direction, inbound in (("ingress", True), ("egress", False)):
        listed = []
        for staged in (False, True):
            for _tier, action, entries in ev.tiers_for(ep, inbound, staged=staged):
                for entry in entries:
                    if staged and not is_staged(entry.key.kind):
                        continue
                    ref = _policy_ref(entry)
                    ref["endOfTier"] = action
                    listed.append(ref)
        out[direction] = listed
    out["profiles"] = list(ep.value.profile_ids)
    return out


def _selected(data: Dataset, text: str, endpoints: list[Endpoint]) -> dict[str, Any]:
    sel = selector(text)
    return {
        "selector": text,
        "endpoints": sorted(e.display for e in endpoints if sel.evaluate(e.labels)),
        "nets": sorted(str(n) for ns in data.netsets if sel.evaluate(ns.labels) for n in ns.nets),
    }


def policy_selection(data: Dataset, key: PolicyKey) -> dict[str, Any] | None:
    """The endpoints ``key``'s selector selects and, per rule, what its peers match (None if
    the stored policy yields no v1 policy: a staged Delete, or one the processors reject)."""
    entry = data.policies.get(key)
    if entry is None:
        return None
    endpoints = data.endpoints()
    sel = selector(entry.value.selector or ALL_SELECTOR)
    out = _policy_ref(entry)
    out["selects"] = sorted(e.display for e in endpoints if sel.evaluate(e.labels))
    for direction, rules in (
        ("ingress", entry.value.inbound_rules),
        ("egress", entry.value.outbound_rules),
    ):
        listed = []
        v3 = entry.v3_rules.get(direction, [])
        for index, rule in enumerate(rules):
            item: dict[str, Any] = {"ruleIndex": index}
            item["rule"] = v3[index] if index < len(v3) else rule.to_json()
            for side in ("source", "destination"):
                short = "src" if side == "source" else "dst"
                positive, negated = combine_selectors(
                    getattr(rule, f"{short}_selector"), getattr(rule, f"not_{short}_selector")
                )
                nets = list(getattr(rule, f"{short}_nets"))
                peer: dict[str, Any] = {}
                if positive:
                    peer["matches"] = _selected(data, positive, endpoints)
                if negated:
                    peer["notMatches"] = _selected(data, negated, endpoints)
                if nets:
                    peer["nets"] = nets
                if peer:
                    item[side] = peer
            listed.append(item)
        out[direction] = listed
    return out
