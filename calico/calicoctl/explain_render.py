"""Text rendering of the explain reports (``calico.policyeval.report``'s dicts): one line per
step of a decision chain, rules shown as the compact JSON of the v3 rule."""

from __future__ import annotations

import json
from typing import Any


def _rule(rule: Any) -> str:
    return json.dumps(rule, separators=(", ", ": "), sort_keys=False)


def _layer(step: dict[str, Any]) -> str:
    """``[untracked]``, ``[forward hostendpoint X]``, ...: a host endpoint layer's tag."""
    if "layer" not in step:
        return ""
    hep = step.get("hostEndpoint")  # other steps name the endpoint in their note
    if hep and step.get("step") in ("rule", "no-match"):
        return f"[{step['layer']} {hep}]"
    return f"[{step['layer']}]"


def _step(step: dict[str, Any]) -> str:
    kind, action = step["step"], step["action"]
    where = " ".join(
        part
        for part in (
            _layer(step),
            f"tier {step['tier']}" if "tier" in step else "",
            step.get("policy", ""),
        )
        if part
    )
    if kind == "rule":
        return f"{where}: rule {step['ruleIndex']} {_rule(step['rule'])} -> {action}"
    if kind == "no-match":
        return f"{where}: no rule matched"
    label = f"{where}: " if where else ""
    if action is None:
        return f"{label}({step.get('note', kind)})"
    return f"{label}{step.get('note', kind)} -> {action}"


def _counts(c: dict[str, Any]) -> str:
    return (
        f"{c['packets']} packets, {c['bytes']} bytes"
        f" (probe +{c['probePackets']} packets, +{c['probeBytes']} bytes)"
    )


def _side(
    title: str, side: dict[str, Any], indent: str = "", live: dict[str, Any] | None = None
) -> list[str]:
    """A side's decision chain; with ``live`` counters each rule step shows its nft counts."""
    lines = [f"{indent}{title} of {side['endpoint'] or 'a non-Calico address'}: {side['verdict']}"]
    counted = iter((live or {}).get("steps", []))
    for step in side["chain"]:
        line = f"{indent}  {_step(step)}"
        if live is not None and step["step"] == "rule":
            c = next(counted, None)
            if c is not None and c["chain"] is not None:
                line += f"  [counters: {_counts(c)}]"
            elif c is not None:
                line += "  [counters: no such chain on this node]"
        lines.append(line)
    return lines


def _live_counters(side: str, data: dict[str, Any]) -> list[str]:
    lines = [f"  {side} counters ({', '.join(data.get('endpointChains') or [data['chain']])}):"]
    if not data["chains"]:
        lines.append("    (no policy or profile chains programmed)")
    for chain in data["chains"]:
        lines.append(f"    {chain['chain']}:")
        lines += [f"      rule {c['ruleIndex']}: {_counts(c)}" for c in chain["rules"]]
        if not chain["rules"]:
            lines.append("      (no counted rules)")
    return lines


def _result(result: dict[str, Any]) -> str:
    if result["verdict"] == "Allow":
        return "Allow"
    by = f", by {result['hostEndpoint']}" if "hostEndpoint" in result else ""
    return f"Deny (at the {result['deniedAt']} of {result['endpoint']}{by})"


def render_connection(report: dict[str, Any]) -> str:
    pkt = report["packet"]
    src = pkt["source"] + (f":{pkt['sourcePort']}" if "sourcePort" in pkt else "")
    dst = pkt["destination"] + (f":{pkt['destinationPort']}" if "destinationPort" in pkt else "")
    head = f"{pkt['protocol']} {src} -> {dst}"
    if "icmpType" in pkt:
        head += f" (type {pkt['icmpType']} code {pkt['icmpCode']})"
    lines = [head]
    counters = report.get("live", {}).get("counters")
    if counters is None:
        lines += _side("Egress", report["egress"])
        lines += _side("Ingress", report["ingress"])
    else:  # the kernel's counts only exist for the sides programmed on this node
        lines += _side("Egress", report["egress"], live=counters.get("egress"))
        lines += _side("Ingress", report["ingress"], live=counters.get("ingress"))
    lines.append(f"Verdict: {_result(report['result'])}")
    staged = report["staged"]
    if (
        staged["result"] != report["result"]
        or staged["egress"] != report["egress"]
        or (staged["ingress"] != report["ingress"])
    ):
        lines.append("Staged policies (NOT ENFORCED), would-be evaluation:")
        lines += _side("Egress", staged["egress"], "  ")
        lines += _side("Ingress", staged["ingress"], "  ")
        lines.append(f"  Would-be verdict: {_result(staged['result'])}")
    else:
        lines.append("Staged policies (not enforced): no change")
    if "live" in report:
        live = report["live"]
        agree = "agrees" if live["agrees"] else f"DISAGREES with the computed {live['compared']}"
        lines.append(f"Live (kernel trace on this node): {live['verdict']} ({agree})")
        if live["rule"]:
            lines.append(f"  deciding rule: {live['rule']}")
        lines.append("  chains: " + " -> ".join(live["chains"]))
        for side in ("egress", "ingress"):
            if side in live.get("counters", {}):
                lines += _live_counters(side, live["counters"][side])
    return "\n".join(lines) + "\n"


def _policy_line(ref: dict[str, Any]) -> str:
    scope = f"{ref['namespace']}/" if "namespace" in ref else ""
    staged = " [staged, not enforced]" if ref.get("staged") else ""
    order = "" if ref["order"] is None else f" order {ref['order']:g}"
    name = f"{ref['kind']} {scope}{ref['name']}"
    return f"  tier {ref['tier']}: {name}{order}{staged}  selector: {ref['selector']}"


def render_endpoint(report: dict[str, Any]) -> str:
    lines = [report["endpoint"]]
    for direction in ("ingress", "egress"):
        lines.append(f"{direction.capitalize()} policies:")
        lines += [_policy_line(ref) for ref in report[direction]] or ["  (none)"]
    lines.append("Profiles: " + (", ".join(report["profiles"]) or "(none)"))
    layers = (("untracked", "Untracked"), ("preDNAT", "Pre-DNAT"), ("forward", "Forward"))
    for layer, title in layers:
        for direction, refs in report.get(layer, {}).items():  # host endpoints only
            lines.append(f"{title} {direction} policies:")
            lines += [_policy_line(ref) for ref in refs] or ["  (none)"]
    return "\n".join(lines) + "\n"


def _peer(side: str, peer: dict[str, Any]) -> list[str]:
    lines = []
    for label, key in (("matches", "matches"), ("does not match", "notMatches")):
        if key in peer:
            m = peer[key]
            lines.append(f"    {side} {label} {m['selector']}:")
            lines += [f"      {e}" for e in m["endpoints"]]
            lines += [f"      net {n}" for n in m["nets"]]
            if not m["endpoints"] and not m["nets"]:
                lines.append("      (nothing)")
    if "nets" in peer:
        lines.append(f"    {side} nets: {', '.join(peer['nets'])}")
    return lines


def render_policy(report: dict[str, Any]) -> str:
    lines = [_policy_line(report).strip()]
    lines.append("Selects:")
    lines += [f"  {e}" for e in report["selects"]] or ["  (no endpoints)"]
    for direction in ("ingress", "egress"):
        for item in report[direction]:
            lines.append(f"{direction} rule {item['ruleIndex']}: {_rule(item['rule'])}")
            for side in ("source", "destination"):
                if side in item:
                    lines += _peer(side, item[side])
    return "\n".join(lines) + "\n"
