"""The three explain questions as plain data (the CLI renders them as text, YAML or JSON):
why a connection is allowed or denied, which policies select an endpoint, and what a policy
selects (design/explain.md).
"""

from __future__ import annotations

from typing import Any

from calico.model import HostEndpointKey, PolicyKey
from calico.policyeval.dataset import Dataset, Endpoint, IPAddress, PolicyEntry, selector
from calico.policyeval.evaluate import (
    ALL_SELECTOR,
    NORMAL,
    PRE_DNAT,
    UNTRACKED,
    Evaluator,
    Packet,
    SideResult,
    Step,
)
from calico.policyeval.hostconfig import FelixConfigs
from calico.policyeval.hostendpoints import endpoint_holding
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


def enforcing_endpoint(found: list[Endpoint], addr: IPAddress) -> list[Endpoint]:
    """The endpoints holding ``addr`` as Felix sees them: several host endpoints of one node
    holding it (a named one and the node's ``*`` one, say) are one interface's, and the one
    Felix's resolver gives that interface polices it (``calico.policyeval.hostendpoints``)."""
    nodes = {e.key.hostname for e in found}
    if len(found) < 2 or len(nodes) != 1 or any(e.kind != "HostEndpoint" for e in found):
        return found
    by_id = {e.key.endpoint_id: e for e in found if isinstance(e.key, HostEndpointKey)}
    values = {k: e.value for k, e in by_id.items()}
    chosen = endpoint_holding(values, str(addr))
    return [e for e in found if e.value is chosen][:1] or found


def _node(ep: Endpoint | None) -> str | None:
    return None if ep is None else ep.key.hostname


def _local_side(ep: Endpoint, direction: str, step: Step, verdict: str) -> SideResult:
    return SideResult(direction, ep.display, verdict, [step])


def _forward_note(data: Dataset, ev: Evaluator, ep: Endpoint | None) -> Step | None:
    """A workload's traffic to or from anything but its own host is forwarded by its node,
    through host endpoint forward chains explain does not model (design/explain.md "Host
    endpoints"): say so when one of that node's endpoints has policy there."""
    if ep is None or ep.kind != "WorkloadEndpoint":
        return None
    node = ep.key.hostname
    for name, raw in data.raw_endpoints("HostEndpoint", "", f'"{node}"'):
        hep = (
            data.endpoint("HostEndpoint", name)
            if (raw.get("spec") or {}).get("node") == node
            else None
        )
        if hep is None:
            continue
        layers = [(True, NORMAL), (False, NORMAL), (True, PRE_DNAT)]
        if any(
            entry.meta.apply_on_forward
            for inbound, layer in layers
            for _tier, _action, entries in ev.tiers_for(hep, inbound, layer=layer)
            for entry in entries
        ):
            return Step(
                "note", None, note=f"forwarded by node {node}: its host endpoints' "
                "applyOnForward and pre-DNAT policy is not evaluated"
            )  # fmt: skip
    return None


def _noted(side: SideResult, note: Step | None) -> SideResult:
    if note is not None:
        side.steps.insert(0, note)
    return side


def _sides(
    ev: Evaluator, src: Endpoint | None, dst: Endpoint | None, pkt: Packet,
    configs: FelixConfigs, staged: bool,
) -> tuple[SideResult, SideResult]:  # fmt: skip
    """The two sides as the source's node and the destination's node police them. Between a
    host and its own workloads (design/felix-rules.md "Chain layout"): host -> workload leaves
    by OUTPUT, which returns for workload interfaces, so neither side is policed; workload ->
    host runs the workload's egress, then DefaultEndpointToHostAction instead of any host
    endpoint's ingress."""
    src_hep = src is not None and src.kind == "HostEndpoint"
    dst_hep = dst is not None and dst.kind == "HostEndpoint"
    same_node = src is not None and dst is not None and _node(src) == _node(dst)
    if src_hep and same_node and dst is not None and dst.kind == "WorkloadEndpoint":
        assert src is not None
        note = "host to its own workload: not policed (OUTPUT returns for workload interfaces)"
        return (
            _local_side(src, "egress", Step("host-to-workload", "Allow", note=note), "Allow"),
            _local_side(dst, "ingress", Step("host-to-workload", "Allow", note=note), "Allow"),
        )
    egress = ev.evaluate_side(
        src, False, pkt, staged=staged, host=configs.for_node(src.key.hostname) if src_hep else None
    )
    if dst_hep and same_node and src is not None and src.kind == "WorkloadEndpoint":
        assert dst is not None
        action = configs.for_node(dst.key.hostname).endpoint_to_host
        verdict = "Deny" if action == "Drop" else "Allow"
        note = (
            f"workload to its own host: DefaultEndpointToHostAction {action}, "
            "host endpoint policy not applied"
        )
        step = Step("workload-to-host", verdict, note=note)
        return egress, _local_side(dst, "ingress", step, verdict)
    ingress = ev.evaluate_side(
        dst, True, pkt, staged=staged, host=configs.for_node(dst.key.hostname) if dst_hep else None
    )
    return _noted(egress, _forward_note(ev.data, ev, src)), _noted(
        ingress, _forward_note(ev.data, ev, dst)
    )


def explain_connection(
    data: Dataset, src: Endpoint | None, dst: Endpoint | None, pkt: Packet, protocol_name: str,
    configs: FelixConfigs | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Source egress then destination ingress, enforced; and the staged (would-be) view.
    ``configs``: the stored FelixConfigurations (host endpoints' failsafe ports and the
    workload-to-host action; none stored = upstream's defaults)."""
    ev = Evaluator(data)
    configs = configs if configs is not None else FelixConfigs()
    egress, ingress = _sides(ev, src, dst, pkt, configs, False)
    s_egress, s_ingress = _sides(ev, src, dst, pkt, configs, True)
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
        out[direction] = _listed(ev, ep, inbound, NORMAL)
    out["profiles"] = list(ep.value.profile_ids)
    if ep.kind == "HostEndpoint":  # its other layers (none for `*`: no untracked there)
        if ep.value.name != "*":
            out[UNTRACKED] = {
                "ingress": _listed(ev, ep, True, UNTRACKED),
                "egress": _listed(ev, ep, False, UNTRACKED),
            }
        out[PRE_DNAT] = {"ingress": _listed(ev, ep, True, PRE_DNAT)}
    return out


def _listed(ev: Evaluator, ep: Endpoint, inbound: bool, layer: str) -> list[dict[str, Any]]:
    listed = []
    for staged in (False, True):
        for _tier, action, entries in ev.tiers_for(ep, inbound, staged=staged, layer=layer):
            for entry in entries:
                if staged and not is_staged(entry.key.kind):
                    continue
                ref = _policy_ref(entry)
                ref["endOfTier"] = action
                listed.append(ref)
    return listed


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
