"""Host endpoint policy on traffic a node forwards (to or from its workloads), walked as the
nftables dataplane renders it (``calico.felix.rules.static.filter_chains`` ``cali-FORWARD``,
``calico.felix.rules.endpoints.host_endpoint_chains``; design/explain.md "Forwarded traffic").

The FORWARD chain runs, in order: the from-host-endpoint forward chain (``cali-fhfw-``) of the
interface the packet came in on, unless an untracked or pre-DNAT allow already set the accept
mark; the source workload's egress chain (in from ``cali*``); the destination workload's ingress
chain (out to ``cali*``); the to-host-endpoint forward chain (``cali-thfw-``) of the interface
it leaves by. A workload interface has no named endpoint, so the ``*`` endpoint's forward chains
see it. Nothing but a drop stops the packet: each chain that does not deny lets it on, and the
forward chains hold only applyOnForward policy (no failsafe ports, no profiles), with an
end-of-tier deny and, when any policy applies, a final deny; with none they are empty. Before
FORWARD, a packet in from a host endpoint's interface crosses its untracked (raw) and pre-DNAT
(mangle) chains, whose failsafe ports only skip that layer here.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from calico.model import HostEndpointKey
from calico.policyeval.chains import HOST_FROM_FWD_PREFIX, HOST_TO_FWD_PREFIX
from calico.policyeval.dataset import Dataset, Endpoint
from calico.policyeval.evaluate import (
    FORWARD,
    PRE_DNAT,
    UNTRACKED,
    Evaluator,
    Packet,
    Step,
    failsafe_match,
    tag_chains,
)
from calico.policyeval.hostconfig import HostConfig
from calico.policyeval.hostendpoints import (
    CrossingUnknown,
    all_interfaces_endpoint,
    crossed_endpoint,
)


@dataclass
class NodeEndpoints:
    """The host endpoints of each node asked about (found by a substring scan of the stored
    texts, converted once)."""

    data: Dataset
    _by_node: dict[str, dict[str, Endpoint]] = field(default_factory=dict)

    def of(self, node: str) -> dict[str, Endpoint]:
        done = self._by_node.get(node)
        if done is None:
            done = {}
            for name, raw in self.data.raw_endpoints("HostEndpoint", "", f'"{node}"'):
                if (raw.get("spec") or {}).get("node") != node:
                    continue
                ep = self.data.endpoint("HostEndpoint", name)
                if ep is not None and isinstance(ep.key, HostEndpointKey):
                    done[ep.key.endpoint_id] = ep
            self._by_node[node] = done
        return done

    def wild(self, node: str) -> Endpoint | None:
        """The ``*`` endpoint in force on ``node`` (its forward chains see workload interfaces)."""
        heps = self.of(node)
        value = all_interfaces_endpoint({k: e.value for k, e in heps.items()})
        return next((e for e in heps.values() if e.value is value), None)

    def crossed(self, node: str, via: str | None, not_on: Collection[str] = ()) -> Endpoint | None:
        """The endpoint of the interface between ``node`` and the outside
        (``calico.policyeval.hostendpoints.crossed_endpoint``; may raise ``CrossingUnknown``)."""
        heps = self.of(node)
        try:
            value = crossed_endpoint({k: e.value for k, e in heps.items()}, via, not_on)
        except CrossingUnknown as exc:
            raise CrossingUnknown(exc.interfaces, node) from None
        return next((e for e in heps.values() if e.value is value), None)


def forward_chain(
    ev: Evaluator, hep: Endpoint, inbound: bool, pkt: Packet, steps: list[Step], staged: bool,
    where: str,
) -> str | None:  # fmt: skip
    """``cali-fhfw-`` (``inbound``: the endpoint's ingress policy) or ``cali-thfw-`` of ``hep``:
    Allow or Deny, or None when no applyOnForward policy applies (the chain lets it on)."""
    start = len(steps)
    direction = "ingress" if inbound else "egress"
    chain = HOST_FROM_FWD_PREFIX if inbound else HOST_TO_FWD_PREFIX
    tiers = ev.tiers_for(hep, inbound, staged=staged, layer=FORWARD)
    verdict: str | None = None
    if not tiers:
        steps.append(
            Step("forward-none", None, layer=FORWARD, note=f"{where} ({chain}): no "
                 f"applyOnForward {direction} policy, forwarded on")
        )  # fmt: skip
    else:
        steps.append(Step("forward-chain", None, layer=FORWARD, note=f"{where} ({chain})"))
        verdict = ev.walk_tiers(tiers, inbound, pkt, steps, FORWARD)
        if verdict is None:  # every tier passed: no profiles here, the chain's final deny
            verdict = "Deny"
            steps.append(
                Step("default", "Deny", layer=FORWARD, note="no applyOnForward policy allowed "
                     "the traffic")
            )  # fmt: skip
    _tag(steps, start, hep, inbound)
    return verdict


def forwarded_in(
    ev: Evaluator, hep: Endpoint, pkt: Packet, steps: list[Step], host: HostConfig, staged: bool,
    where: str,
) -> str | None:  # fmt: skip
    """A packet in through ``hep``'s interface to be forwarded: untracked (not for ``*``),
    pre-DNAT, then ``cali-fhfw-`` unless one of the first two allowed; "Deny" or None."""
    start = len(steps)
    layers = [PRE_DNAT] if hep.value.name == "*" else [UNTRACKED, PRE_DNAT]
    accepted = None
    for layer in layers:
        tiers = ev.tiers_for(hep, True, staged=staged, layer=layer)
        if not tiers:
            continue
        hit = failsafe_match(host.failsafe_inbound, pkt, True, "dport")
        if hit is None and layer == UNTRACKED:  # the raw chain also passes failsafe replies
            hit = failsafe_match(host.failsafe_outbound, pkt, True, "sport")
        if hit is not None:
            steps.append(
                Step("failsafe", None, layer=layer, note=f"failsafe port {hit}: {layer} policy "
                     "skipped (forwarded traffic gets no failsafe in the forward chains)")
            )  # fmt: skip
            continue
        verdict = ev.walk_layer(tiers, True, pkt, steps, layer)
        if verdict == "Deny":
            _tag(steps, start, hep, True)
            return "Deny"
        if verdict == "Allow":
            accepted = layer
            break
        steps.append(
            Step("layer-end", None, layer=layer, note=f"no {layer} policy allowed or denied:"
                 " on to the next layer")
        )  # fmt: skip
    if accepted is not None:
        steps.append(
            Step("forward-skipped", None, layer=FORWARD, note=f"{where} (cali-fhfw-): skipped, "
                 f"the {accepted} allow set the accept mark")
        )  # fmt: skip
    _tag(steps, start, hep, True)
    if accepted is not None:
        return None
    return "Deny" if forward_chain(ev, hep, True, pkt, steps, staged, where) == "Deny" else None


def _tag(steps: list[Step], start: int, hep: Endpoint, inbound: bool) -> None:
    """Steps from ``start`` on were taken in ``hep``'s chains (which ones: their layer)."""
    for step in steps[start:]:
        step.host_endpoint = hep.display
    tag_chains(steps, start, hep, inbound)
