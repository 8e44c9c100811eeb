"""The three explain questions as plain data (the CLI renders them as text, YAML or JSON):
why a connection is allowed or denied, which policies select an endpoint, and what a policy
selects (design/explain.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from calico.model import HostEndpointKey, PolicyKey
from calico.policyeval.dataset import Dataset, Endpoint, IPAddress, PolicyEntry, selector
from calico.policyeval.evaluate import (
    ALL_SELECTOR,
    FORWARD,
    NORMAL,
    PRE_DNAT,
    UNTRACKED,
    Evaluator,
    Packet,
    SideResult,
    Step,
)
from calico.policyeval.forwarding import NodeEndpoints, forward_chain, forwarded_in
from calico.policyeval.hostconfig import FelixConfigs, HostConfig
from calico.policyeval.hostendpoints import endpoint_holding
from calico.policyeval.ordering import is_staged
from calico.policyeval.rulesem import combine_selectors
from calico.policyeval.tunnels import TUNNEL_DEVICES, Routing


def _overall(egress: SideResult, ingress: SideResult) -> dict[str, Any]:
    for side in (egress, ingress):
        if side.verdict != "Allow":
            out = {"verdict": "Deny", "deniedAt": side.direction, "endpoint": side.endpoint}
            last = side.steps[-1] if side.steps else None
            if last is not None and last.host_endpoint is not None:
                out["hostEndpoint"] = last.host_endpoint  # a forward chain denied it
            return out
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


@dataclass(frozen=True)
class HostAddress:
    """A side's address that only a Node resource lists (no host endpoint holds it)."""

    node: str
    field: str  # where the Node lists it, e.g. spec.bgp.ipv4Address

    @property
    def display(self) -> str:
        return f"host of node {self.node}"


@dataclass
class _Context:
    ev: Evaluator
    configs: FelixConfigs
    heps: NodeEndpoints
    via: str | None
    staged: bool
    routing: Routing | None = None
    host_crossings: dict[bool, Step] = field(default_factory=dict)  # by inbound


def _display(ep: Endpoint | None, host: HostAddress | None) -> str | None:
    return ep.display if ep is not None else host.display if host is not None else None


def _host_config(ctx: _Context, ep: Endpoint | None) -> HostConfig | None:
    if ep is None or ep.kind != "HostEndpoint":
        return None
    return ctx.configs.for_node(ep.key.hostname)


def _side(
    ctx: _Context, ep: Endpoint | None, host: HostAddress | None, inbound: bool, pkt: Packet
) -> SideResult:
    """One endpoint's own chain; a node's address with no endpoint of its own is policed by
    the endpoint of the interface it crosses, if any (``NodeEndpoints.crossed``)."""
    direction = "ingress" if inbound else "egress"
    addr = pkt.dst if inbound else pkt.src
    if host is None:
        return ctx.ev.evaluate_side(ep, inbound, pkt, staged=ctx.staged, host=_host_config(ctx, ep))
    known = f"{addr} is node {host.node}'s ({host.field}), listed by no host endpoint"
    crossing = ctx.host_crossings.get(inbound)
    first = [] if crossing is None else [replace(crossing)]
    if ep is None:
        note = f"{known}; no host endpoint polices the interface it crosses: not policed"
        step = Step("host-address", "Allow", note=note)
        return SideResult(direction, host.display, "Allow", [step, *first])
    side = ctx.ev.evaluate_side(ep, inbound, pkt, staged=ctx.staged, host=_host_config(ctx, ep))
    note = f"{known}: {ep.display} polices the interface it crosses"
    side.steps[:0] = [Step("host-address", None, note=note), *first]
    return side


def _route_crossing(
    routing: Routing | None, via: str | None, node: str, peer_node: str | None, inbound: bool,
    pkt: Packet,
) -> tuple[str | None, Step | None]:  # fmt: skip
    """The interface ``node`` takes the packet to or from ``peer_node`` through (``via`` for
    ``NodeEndpoints.crossed``): ``--via-interface`` if given, else the tunnel device the
    sender's route uses (``calico.policyeval.tunnels``, with a ``crossing`` step saying so),
    else None (the node's uplink)."""
    if via is not None or routing is None or peer_node is None or peer_node == node:
        return via, None
    sender, receiver = (peer_node, node) if inbound else (node, peer_node)
    found = routing.crossing(sender, receiver, pkt.dst)
    verb = "receives it on" if inbound else "sends it out on"
    note = f"node {node} {verb} {found.device or 'its uplink'}: {found.reason}"
    return found.device, Step("crossing", None, note=note, device=found.device)


def _not_on(step: Step | None) -> frozenset[str]:
    """A route known to take the uplink crosses no endpoint named for a tunnel device."""
    return TUNNEL_DEVICES if step is not None and step.device is None else frozenset()


def _forwarded(
    ctx: _Context, wl: Endpoint, inbound: bool, peer_node: str | None, pkt: Packet,
    side: SideResult,
) -> SideResult:  # fmt: skip
    """A workload's side of traffic its node forwards, in ``cali-FORWARD``'s order
    (``calico.policyeval.forwarding``): egress = the ``*`` endpoint's from-HEP forward chain on
    the workload's interface, the workload's egress, then (peer off this node) the to-HEP
    forward chain of the interface it leaves by; ingress = (peer off this node) the endpoint
    it came in through (untracked, pre-DNAT, from-HEP forward), the workload's ingress, then the
    ``*`` endpoint's to-HEP forward chain on the workload's interface."""
    node = wl.key.hostname
    wild = ctx.heps.wild(node)
    off_node = peer_node != node
    before: list[Step] = []
    after: list[Step] = []
    via, route = _route_crossing(ctx.routing, ctx.via, node, peer_node, inbound, pkt)
    on = f" on {route.device}" if route is not None and route.device else ""
    if route is not None:
        (before if inbound else after).append(route)
    if inbound:
        crossed = ctx.heps.crossed(node, via, _not_on(route)) if off_node else None
        first = None
        if crossed is not None:
            where = f"forwarded in through {crossed.display} of node {node}{on}"
            host = ctx.configs.for_node(node)
            first = forwarded_in(ctx.ev, crossed, pkt, before, host, ctx.staged, where)
    else:
        where = f"forwarded from the workload's interface: {wild.display}" if wild else ""
        first = forward_chain(ctx.ev, wild, True, pkt, before, ctx.staged, where) if wild else None
    if first == "Deny":
        return SideResult(side.direction, side.endpoint, "Deny", before)
    if side.verdict != "Allow":
        return SideResult(side.direction, side.endpoint, side.verdict, [*before, *side.steps])
    last = None
    if inbound and wild is not None:
        where = f"forwarded to the workload's interface: {wild.display}"
        last = forward_chain(ctx.ev, wild, False, pkt, after, ctx.staged, where)
    elif not inbound and off_node:
        crossed = ctx.heps.crossed(node, via, _not_on(route))
        if crossed is not None:
            where = f"forwarded out through {crossed.display} of node {node}{on}"
            last = forward_chain(ctx.ev, crossed, False, pkt, after, ctx.staged, where)
    verdict = "Deny" if last == "Deny" else "Allow"
    return SideResult(side.direction, side.endpoint, verdict, [*before, *side.steps, *after])


def _sides(
    ctx: _Context, src: Endpoint | None, dst: Endpoint | None, hosts: tuple[HostAddress | None,
    HostAddress | None], pkt: Packet,
) -> tuple[SideResult, SideResult]:  # fmt: skip
    """The two sides as the source's node and the destination's node police them. Between a
    host and its own workloads (design/felix-rules.md "Chain layout"): host -> workload leaves
    by OUTPUT, which returns for workload interfaces, so neither side is policed; workload ->
    host runs the workload's egress, then DefaultEndpointToHostAction instead of any host
    endpoint's ingress. A workload's traffic with anything else is forwarded by its node
    (:func:`_forwarded`)."""
    src_host, dst_host = hosts
    src_node = _node(src) or (src_host.node if src_host else None)
    dst_node = _node(dst) or (dst_host.node if dst_host else None)
    src_is_host = src_host is not None or (src is not None and src.kind == "HostEndpoint")
    dst_is_host = dst_host is not None or (dst is not None and dst.kind == "HostEndpoint")
    src_wl = src if src is not None and src.kind == "WorkloadEndpoint" else None
    dst_wl = dst if dst is not None and dst.kind == "WorkloadEndpoint" else None
    same_node = src_node is not None and src_node == dst_node
    if src_is_host and same_node and dst_wl is not None:
        note = "host to its own workload: not policed (OUTPUT returns for workload interfaces)"
        shown = _display(src, src_host)
        return (
            SideResult("egress", shown, "Allow", [Step("host-to-workload", "Allow", note=note)]),
            SideResult("ingress", dst_wl.display, "Allow", [Step("host-to-workload", "Allow",
                       note=note)]),
        )  # fmt: skip
    egress = _side(ctx, src, src_host, False, pkt)
    if src_wl is not None and not (dst_is_host and same_node):
        egress = _forwarded(ctx, src_wl, False, dst_node, pkt, egress)
    if dst_is_host and same_node and src_wl is not None:
        action = ctx.configs.for_node(src_wl.key.hostname).endpoint_to_host
        verdict = "Deny" if action == "Drop" else "Allow"
        note = (
            f"workload to its own host: DefaultEndpointToHostAction {action}, "
            "host endpoint policy not applied"
        )
        step = Step("workload-to-host", verdict, note=note)
        return egress, SideResult("ingress", _display(dst, dst_host), verdict, [step])
    ingress = _side(ctx, dst, dst_host, True, pkt)
    if dst_wl is not None:
        ingress = _forwarded(ctx, dst_wl, True, src_node, pkt, ingress)
    return egress, ingress


def explain_connection(
    data: Dataset, src: Endpoint | None, dst: Endpoint | None, pkt: Packet, protocol_name: str,
    configs: FelixConfigs | None = None, *, hosts: tuple[HostAddress | None, HostAddress | None]
    = (None, None), via: str | None = None, routing: Routing | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Source egress then destination ingress, enforced; and the staged (would-be) view.
    ``configs``: the stored FelixConfigurations (host endpoints' failsafe ports and the
    workload-to-host action; none stored = upstream's defaults). ``hosts``: the node of a side
    whose address only a Node lists (its endpoint, if any, is the one of the interface it
    crosses); ``via``: the host interface forwarded traffic crosses (default: the node's one
    uplink endpoint, else its ``*`` one); ``routing``: the IP pools and Nodes, so that traffic
    between nodes crosses the tunnel device Felix routes it by (``via`` overrides; without
    it, the uplink). Raises ``CrossingUnknown`` when that is not decided."""
    ev = Evaluator(data)
    configs = configs if configs is not None else FelixConfigs()
    heps = NodeEndpoints(data)
    nodes = [_node(ep) or (h.node if h else None) for ep, h in zip((src, dst), hosts, strict=True)]
    ends = []
    host_crossings: dict[bool, Step] = {}
    for inbound, ep, host in zip((False, True), (src, dst), hosts, strict=True):
        if ep is None and host is not None:
            peer = nodes[0 if inbound else 1]
            side_via, step = _route_crossing(routing, via, host.node, peer, inbound, pkt)
            if step is not None:
                host_crossings[inbound] = step
            ep = heps.crossed(host.node, side_via, _not_on(step))
        ends.append(ep)
    out: dict[str, Any] = {"packet": packet_dict(pkt, protocol_name)}
    for staged in (False, True):
        ctx = _Context(ev, configs, heps, via, staged, routing, host_crossings)
        egress, ingress = _sides(ctx, ends[0], ends[1], hosts, pkt)
        view = {"egress": egress.to_dict(), "ingress": ingress.to_dict()}
        view["result"] = _overall(egress, ingress)
        if staged:
            out["staged"] = {"enforced": False, **view}
        else:
            out.update(view)
    return out


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
        out[FORWARD] = {  # applyOnForward: also in the cali-fhfw-/thfw- forward chains
            "ingress": _listed(ev, ep, True, FORWARD),
            "egress": _listed(ev, ep, False, FORWARD),
        }
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
