"""Walk one side of a connection (the source's egress, the destination's ingress) through an
endpoint's tiers, policies and profiles the way Felix's rendered chains do
(``calico.felix.rules.endpoints``, design/felix-rules.md "Chain layout"):

* a workload that is not active denies everything;
* tiers in order (``calico.policyeval.ordering``), a tier applying only if it holds an enforced
  policy selecting the endpoint in this direction; policies in order within the tier;
* in a policy the first matching rule decides: Allow ends the side (allowed), Deny ends it
  (denied), Pass skips the rest of the tier, Log records and goes on; no match -> next policy;
* a tier that ends without Allow/Deny/Pass takes its end-of-tier action (Deny unless the tier
  says Pass; a policy naming a tier that does not exist lands in an invalid tier that denies);
* then the profiles in order (a missing profile denies; Pass in a profile is no match);
* then deny.

A host endpoint's side first checks the failsafe ports, then its untracked and (ingress)
pre-DNAT layers, which only decide on Allow or Deny (design/explain.md "Host endpoints"); the
host endpoint chains a forwarded packet crosses are ``calico.policyeval.forwarding``'s, on the
tier walk here (:meth:`Evaluator.walk_tiers`).

Rule matching mirrors the rule scanner (negated selectors folded into positive ones, named
ports as selector+protocol+name sets, a plain selector set skipped when a side has only named
ports) and the nft match renderer (family, protocol, nets, ports, ICMP). Service matches have
no service index behind them in Felix (their sets stay empty), so they never match here either;
HTTP matches are not enforced by the nft dataplane and are ignored, as Felix ignores them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from calico.model import values as v1
from calico.policyeval.chains import host_endpoint_chain
from calico.policyeval.dataset import Dataset, Endpoint, IPAddress, IPNetwork, PolicyEntry, selector
from calico.policyeval.hostconfig import Failsafe, FelixConfigs, HostConfig
from calico.policyeval.ordering import (
    is_staged,
    policy_sort_key,
    tier_default_action,
    tier_sort_key,
)
from calico.policyeval.rulesem import (
    ICMP_V4,
    ICMP_V6,
    combine_selectors,
    infer_ip_version,
    named_port_protocol,
    port_protocol,
    protocol_number,
    split_ports,
)

ALL_SELECTOR = "all()"
# The layers a policy is rendered in (raw: untracked, mangle: pre-DNAT, filter: normal), and
# the filter FORWARD chains of a host endpoint (applyOnForward normal policy, cali-fhfw/thfw-).
UNTRACKED, PRE_DNAT, NORMAL, FORWARD = "untracked", "preDNAT", "normal", "forward"
_STAGED_OF = {
    "StagedNetworkPolicy": "NetworkPolicy",
    "StagedGlobalNetworkPolicy": "GlobalNetworkPolicy",
    "StagedKubernetesNetworkPolicy": "KubernetesNetworkPolicy",
}


@dataclass(frozen=True)
class Packet:
    """The first packet of a connection; ports are None for protocols without them."""

    protocol: int
    src: IPAddress
    dst: IPAddress
    src_port: int | None = None
    dst_port: int | None = None
    icmp_type: int | None = None
    icmp_code: int | None = None

    @property
    def version(self) -> int:
        return self.src.version


_STEP_FIELDS = (
    ("tier", "tier"),
    ("policy", "policy"),
    ("rule_index", "ruleIndex"),
    ("rule", "rule"),
    ("layer", "layer"),
    ("host_endpoint", "hostEndpoint"),
    ("endpoint_chain", "endpointChain"),
    ("device", "device"),
    ("note", "note"),
)


@dataclass
class Step:
    """One link of a decision chain."""

    kind: str  # rule | no-match | end-of-tier | profile-rule | profile-no-match | default | ...
    action: str | None  # Allow | Deny | Pass | Log; None: no decision
    tier: str | None = None
    policy: str | None = None
    rule_index: int | None = None
    rule: Any = None
    note: str = ""
    layer: str | None = None  # untracked | preDNAT | forward host endpoint layers; None = normal
    host_endpoint: str | None = None  # the endpoint a forwarded packet's step belongs to
    endpoint_chain: str | None = None  # a host endpoint step's nft chain (``--live`` reads it)
    device: str | None = None  # a ``crossing`` step's device between nodes (None: the uplink)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.kind, "action": self.action}
        for name, label in _STEP_FIELDS:
            value = getattr(self, name)
            if value is not None and value != "":
                out[label] = value
        return out


@dataclass
class SideResult:
    direction: str  # egress | ingress
    endpoint: str | None
    verdict: str  # Allow | Deny
    steps: list[Step] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "direction": self.direction,
            "endpoint": self.endpoint,
            "verdict": self.verdict,
            "chain": [s.to_dict() for s in self.steps],
        }


@lru_cache(maxsize=4096)
def _nets(texts: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(t, strict=False) for t in texts)


_ACTIONS = {"allow": "Allow", "deny": "Deny", "pass": "Pass", "next-tier": "Pass", "log": "Log"}


def v3_action(action: str) -> str:
    return _ACTIONS.get(action, action)


class Evaluator:
    """Answers rule matches and side walks over one :class:`Dataset`."""

    def __init__(self, data: Dataset) -> None:
        self.data = data
        self._sel_cache: dict[tuple[IPAddress, str], bool] = {}

    # -- IP set membership ---------------------------------------------------------------------

    def in_selector_set(self, addr: IPAddress, text: str) -> bool:
        """Is ``addr`` in the IP set Felix builds for selector ``text``?"""
        key = (addr, text)
        hit = self._sel_cache.get(key)
        if hit is None:
            sel = selector(text)
            hit = any(sel.evaluate(labels) for labels in self.data.labelled_items_at(addr))
            self._sel_cache[key] = hit
        return hit

    def in_named_port_set(
        self, pkt: Packet, addr: IPAddress, port: int | None, text: str, proto: str, name: str
    ) -> bool:
        """Is ``addr . l4proto . port`` in the named-port set (selector, protocol, port name)?"""
        if port is None or protocol_number(proto) != pkt.protocol:
            return False
        sel = selector(text)
        for ep in self.data.endpoints_at(addr):
            if not sel.evaluate(ep.labels):
                continue
            for p in ep.value.ports:
                if p.name == name and port_protocol(p.protocol or "") == proto and p.port == port:
                    return True
        return False

    # -- rules ---------------------------------------------------------------------------------

    def rule_matches(self, rule: v1.Rule, pkt: Packet) -> bool:
        version = infer_ip_version(rule.ip_version, rule.protocol)
        if version is not None and version != pkt.version:
            return False
        proto = None if rule.protocol is None else protocol_number(rule.protocol)
        if (proto == ICMP_V4 and pkt.version == 6) or (proto == ICMP_V6 and pkt.version == 4):
            return False
        if proto is not None and proto != pkt.protocol:
            return False
        if rule.not_protocol is not None and protocol_number(rule.not_protocol) == pkt.protocol:
            return False
        for addr, nets, not_nets in (
            (pkt.src, rule.src_nets, rule.not_src_nets),
            (pkt.dst, rule.dst_nets, rule.not_dst_nets),
        ):
            if nets:
                mine = [n for n in _nets(nets) if n.version == pkt.version]
                if not any(addr in n for n in mine):
                    return False
            if any(addr in n for n in _nets(not_nets) if n.version == pkt.version):
                return False
        np_proto = named_port_protocol(rule.protocol)
        for side, addr, port in (("src", pkt.src, pkt.src_port), ("dst", pkt.dst, pkt.dst_port)):
            if not self._side_matches(rule, side, addr, port, np_proto, pkt):
                return False
        if rule.dst_service or rule.src_service:
            return False  # no service index feeds Felix's service sets: they stay empty
        if rule.icmp_type is not None and (
            pkt.icmp_type != rule.icmp_type
            or (rule.icmp_code is not None and pkt.icmp_code != rule.icmp_code)
        ):
            return False
        return not (
            rule.not_icmp_type is not None
            and pkt.icmp_type == rule.not_icmp_type
            and (rule.not_icmp_code is None or pkt.icmp_code == rule.not_icmp_code)
        )

    def _side_matches(
        self, rule: v1.Rule, side: str, addr: IPAddress, port: int | None, np_proto: str,
        pkt: Packet,
    ) -> bool:  # fmt: skip
        positive, negated = combine_selectors(
            getattr(rule, f"{side}_selector"), getattr(rule, f"not_{side}_selector")
        )
        numeric, named = split_ports(getattr(rule, f"{side}_ports"))
        not_numeric, not_named = split_ports(getattr(rule, f"not_{side}_ports"))
        port_sel = positive or ALL_SELECTOR
        if numeric or named:
            in_numeric = port is not None and any(a <= port <= b for a, b in numeric)
            if not in_numeric and not any(
                self.in_named_port_set(pkt, addr, port, port_sel, np_proto, n) for n in named
            ):
                return False
        if not_numeric and port is not None and any(a <= port <= b for a, b in not_numeric):
            return False
        if any(self.in_named_port_set(pkt, addr, port, port_sel, np_proto, n) for n in not_named):
            return False
        if positive and (numeric or not named) and not self.in_selector_set(addr, positive):
            return False
        return not (negated and self.in_selector_set(addr, negated))

    # -- which policies apply ------------------------------------------------------------------

    def tiers_for(
        self, ep: Endpoint, inbound: bool, *, staged: bool = False, layer: str = NORMAL
    ) -> list[tuple[str, str, list[PolicyEntry]]]:
        """(tier, end-of-tier action, policies) in enforcement order, for one layer: normal
        (tracked, filter) policy by default, or a host endpoint's untracked / pre-DNAT policy,
        or its forward chains' (the normal policies with applyOnForward).
        ``staged``: the would-be view, staged policies enforced in place of the policies they
        stage."""
        replaced = set()
        if staged:  # a staged policy (Set or Delete) stands in for the policy it stages
            replaced = {
                (_STAGED_OF[k.kind], k.namespace, k.name)
                for k in self.data.policy_sources()
                if k.kind in _STAGED_OF
            }
        chosen: dict[str, list[PolicyEntry]] = {}
        for entry in self.data.candidate_policies(ep):
            key = entry.key
            meta = entry.meta
            own = UNTRACKED if meta.untracked else PRE_DNAT if meta.pre_dnat else NORMAL
            if own != layer and not (layer == FORWARD and own == NORMAL and meta.apply_on_forward):
                continue
            if not (meta.ingress if inbound else meta.egress):
                continue
            if is_staged(key.kind):
                if not staged:
                    continue
            elif (key.kind, key.namespace, key.name) in replaced:
                continue
            if not selector(entry.value.selector or ALL_SELECTOR).evaluate(ep.labels):
                continue
            chosen.setdefault(meta.tier, []).append(entry)

        def tier_key(name: str) -> tuple[bool, bool, float, str]:
            tier = self.data.tiers.get(name)
            return tier_sort_key(name, tier is not None, tier.order if tier else None)

        return [
            (
                name,
                tier_default_action(self.data.tiers.get(name)),
                sorted(chosen[name], key=lambda e: policy_sort_key(e.key, e.meta)),
            )
            for name in sorted(chosen, key=tier_key)
        ]

    # -- one side ------------------------------------------------------------------------------

    def evaluate_side(
        self, ep: Endpoint | None, inbound: bool, pkt: Packet, *, staged: bool = False,
        host: HostConfig | None = None,
    ) -> SideResult:  # fmt: skip
        """One side's chain. A host endpoint's (``host``: its node's Felix parameters, None =
        upstream's defaults) starts with the failsafe ports, then its untracked and (ingress)
        pre-DNAT layers."""
        direction = "ingress" if inbound else "egress"
        if ep is None:
            return SideResult(
                direction, None, "Allow",
                [Step("no-endpoint", "Allow", note="not a Calico endpoint: no policy applies")],
            )  # fmt: skip
        result = SideResult(direction, ep.display, "Deny")
        steps = result.steps
        if ep.kind == "HostEndpoint":
            host = host if host is not None else FelixConfigs().for_node(ep.key.hostname)
            verdict = self._host_layers(ep, inbound, pkt, steps, host, staged)
            if verdict is None:
                self._normal_side(ep, inbound, pkt, staged, result)
            else:
                result.verdict = verdict
            tag_chains(steps, 0, ep, inbound)
            return result
        return self._normal_side(ep, inbound, pkt, staged, result)

    def _normal_side(
        self, ep: Endpoint, inbound: bool, pkt: Packet, staged: bool, result: SideResult
    ) -> SideResult:
        """The normal (filter) layer: tiers, profiles, the final deny."""
        direction, steps = result.direction, result.steps
        if not ep.active:
            steps.append(Step("endpoint-down", "Deny", note="endpoint is not active"))
            return result
        verdict = self.walk_tiers(self.tiers_for(ep, inbound, staged=staged), inbound, pkt, steps)
        if verdict is not None:
            result.verdict = verdict
            return result
        for pid in ep.value.profile_ids:
            prof = self.data.profile_rules.get(pid)
            name = f"Profile {pid}"
            if prof is None:
                steps.append(
                    Step("profile-missing", "Deny", policy=name, note="missing profile denies")
                )
                return result
            rules = prof.inbound_rules if inbound else prof.outbound_rules
            v3_rules = self.data.profile_v3_rules.get(pid, {}).get(direction, [])
            verdict = self.walk_rules(rules, v3_rules, pkt, steps, None, name)
            if verdict in ("Allow", "Deny"):
                result.verdict = verdict
                return result
        steps.append(Step("default", "Deny", note="no policy or profile allowed the traffic"))
        return result

    def walk_tiers(
        self, tiers: list[tuple[str, str, list[PolicyEntry]]], inbound: bool, pkt: Packet,
        steps: list[Step], layer: str | None = None, end_of_tier: bool = True,
    ) -> str | None:  # fmt: skip
        """A tracked chain's tiers: the first Allow/Deny decides, Pass skips to the next tier,
        a tier no rule decided takes its end-of-tier action (Deny decides); None when every
        tier passed (on to the profiles, or a forward chain's final deny). Without
        ``end_of_tier`` (an allow-only layer: untracked, pre-DNAT) a tier nobody decided just
        goes on to the next one, with no step."""
        direction = "ingress" if inbound else "egress"
        for tier, default_action, entries in tiers:
            passed = False
            for entry in entries:
                rules = entry.value.inbound_rules if inbound else entry.value.outbound_rules
                v3_rules = entry.v3_rules.get(direction, [])
                verdict = self.walk_rules(rules, v3_rules, pkt, steps, tier, entry.display, layer)
                if verdict in ("Allow", "Deny"):
                    return verdict
                if verdict == "Pass":
                    passed = True
                    break
            if passed or not end_of_tier:
                continue
            steps.append(
                Step("end-of-tier", default_action, tier=tier, layer=layer, note=f"no policy in "
                     f"tier {tier} decided: end-of-tier action {default_action}")
            )  # fmt: skip
            if default_action != "Pass":
                return "Deny"
        return None

    def walk_rules(
        self, rules: Sequence[v1.Rule], v3_rules: Sequence[Any], pkt: Packet, steps: list[Step],
        tier: str | None, name: str, layer: str | None = None,
    ) -> str | None:  # fmt: skip
        """The first deciding rule's action (Allow/Deny/Pass), logging Log rules; None if none."""
        for index, rule in enumerate(rules):
            if not self.rule_matches(rule, pkt):
                continue
            action = v3_action(rule.action)
            shown = v3_rules[index] if index < len(v3_rules) else rule.to_json()
            steps.append(
                Step("rule", action, tier=tier, policy=name, rule_index=index, rule=shown,
                     layer=layer)
            )  # fmt: skip
            if action != "Log":
                return action
        steps.append(
            Step("no-match", None, tier=tier, policy=name, note="no rule matched", layer=layer)
        )
        return None

    # -- host endpoints ------------------------------------------------------------------------

    def _host_layers(
        self, ep: Endpoint, inbound: bool, pkt: Packet, steps: list[Step], host: HostConfig,
        staged: bool,
    ) -> str | None:  # fmt: skip
        """Failsafe ports, then untracked (raw) and, inbound, pre-DNAT (mangle) policy, as the
        chains ``calico.felix.rules.endpoints.host_endpoint_chains`` renders; the verdict if
        one of them decided, else None (on to the normal layer). Failsafe entries are in every
        layer's chain first, so a failsafe packet is accepted whatever the policy says; the raw
        layer also accepts the replies of the other direction's failsafes (no conntrack
        there), which only skips the untracked policy."""
        forward, reverse = (
            (host.failsafe_inbound, host.failsafe_outbound)
            if inbound
            else (host.failsafe_outbound, host.failsafe_inbound)
        )
        param = "FailsafeInboundHostPorts" if inbound else "FailsafeOutboundHostPorts"
        hit = failsafe_match(forward, pkt, inbound, "dport")
        if hit is not None:
            steps.append(Step("failsafe", "Allow", note=f"failsafe port {hit} ({param})"))
            return "Allow"
        layers = [] if ep.value.name == "*" else [UNTRACKED]  # upstream: no `*` doNotTrack
        layers += [PRE_DNAT] if inbound else []
        for layer in layers:
            tiers = self.tiers_for(ep, inbound, staged=staged, layer=layer)
            if not tiers:
                continue
            if layer == UNTRACKED:
                back = failsafe_match(reverse, pkt, inbound, "sport")
                if back is not None:
                    other = "Outbound" if inbound else "Inbound"
                    steps.append(
                        Step("failsafe-reply", None, layer=layer, note=f"reply of failsafe port "
                             f"{back} (Failsafe{other}HostPorts): untracked policy skipped")
                    )  # fmt: skip
                    continue
            verdict = self.walk_layer(tiers, inbound, pkt, steps, layer)
            if verdict is not None:
                return verdict
            steps.append(
                Step("layer-end", None, layer=layer, note=f"no {layer} policy allowed or denied:"
                     " on to the next layer")
            )  # fmt: skip
        return None

    def walk_layer(
        self, tiers: list[tuple[str, str, list[PolicyEntry]]], inbound: bool, pkt: Packet,
        steps: list[Step], layer: str,
    ) -> str | None:  # fmt: skip
        """An allow-only layer: Allow/Deny decide, Pass and a tier's end go to the next tier
        (no end-of-tier deny, no profiles, no final deny); None if neither decided."""
        return self.walk_tiers(tiers, inbound, pkt, steps, layer, end_of_tier=False)


def failsafe_match(
    entries: Sequence[Failsafe], pkt: Packet, inbound: bool, port_field: str
) -> Failsafe | None:
    """The first failsafe entry the packet matches (protocol, its ``port_field`` port, the
    peer - source inbound, destination outbound - in the entry's net), as the failsafe chains
    of ``calico.felix.rules.static`` match."""
    port = pkt.dst_port if port_field == "dport" else pkt.src_port
    peer = pkt.src if inbound else pkt.dst
    for fs in entries:
        if pkt.protocol != (6 if fs.protocol == "tcp" else 17) or port != fs.port:
            continue
        if fs.net is not None and (fs.net.version != peer.version or peer not in fs.net):
            continue
        return fs
    return None


def tag_chains(steps: Sequence[Step], start: int, ep: Endpoint, inbound: bool) -> None:
    """Name the nft chain (``calico.policyeval.chains.host_endpoint_chain``) each host endpoint
    step from ``start`` on was taken in, by its layer, unless it already has one; not a
    failsafe step (the first of the endpoint's layers to hold a failsafe jump took it)."""
    for step in steps[start:]:
        if step.endpoint_chain is None and not step.kind.startswith("failsafe"):
            layer = step.layer or NORMAL
            step.endpoint_chain = host_endpoint_chain(ep.value.name, layer, inbound)
