"""Per-rule packet/byte counters of an endpoint's policy and profile chains, read from Felix's nft
table on this node for ``calicoctl explain --live``.

Felix counts the deciding nft rule of every policy/profile rule and writes the rule's index in
its comment (``calico.policyeval.chains``), so the counts of one rule's per-family copies add up
here. The chains read are the workload's own (``cali-fw-`` for egress, ``cali-tw-`` for ingress),
the host endpoint chains of this node the computed steps name (``endpointChain``: forward chains
of the uplink and of ``*`` on workload interfaces, a host endpoint's own), and the policy/profile
chains they jump to, in jump order, directly or through a policy group chain (``cali-gi-``/
``cali-go-``: calico.felix.rules.groups). Reads only; nothing is reset.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Iterator
from typing import Any

from calico.policyeval.chains import (
    FILTER_LAYER,
    GROUP_INBOUND_PREFIX,
    GROUP_OUTBOUND_PREFIX,
    HOST_FROM_FWD_PREFIX,
    HOST_FROM_PREFIX,
    NFT_LAYER,
    POLICY_INBOUND_PREFIX,
    POLICY_OUTBOUND_PREFIX,
    PROFILE_INBOUND_PREFIX,
    PROFILE_OUTBOUND_PREFIX,
    WL_FROM_PREFIX,
    WL_TO_PREFIX,
    policy_chain_id,
    rule_index,
)

FELIX_TABLE = "calico"
# Policy and profile chains of every layer (untracked policy is in raw, pre-DNAT in mangle).
_COUNTED = tuple(
    f"{layer}-{p}"
    for layer in sorted(set(NFT_LAYER.values()))
    for p in (
        POLICY_INBOUND_PREFIX,
        POLICY_OUTBOUND_PREFIX,
        PROFILE_INBOUND_PREFIX,
        PROFILE_OUTBOUND_PREFIX,
    )
)
_GROUPS = tuple(
    f"{layer}-{p}"
    for layer in sorted(set(NFT_LAYER.values()))
    for p in (GROUP_INBOUND_PREFIX, GROUP_OUTBOUND_PREFIX)
)
_INBOUND_ENDPOINT = (WL_TO_PREFIX, HOST_FROM_PREFIX, HOST_FROM_FWD_PREFIX)

Counts = dict[int, tuple[int, int]]  # rule index -> (packets, bytes)
Snapshot = dict[str, dict[str, Counts]]  # endpoint chain -> policy/profile chain -> counts


def endpoint_chain(iface: str, ingress: bool) -> str:
    return f"{FILTER_LAYER}-{WL_TO_PREFIX if ingress else WL_FROM_PREFIX}{iface}"


def step_chain(policy: str, ingress: bool, layer: str = FILTER_LAYER) -> str | None:
    """The chain of a decision step's ``policy`` ("GlobalNetworkPolicy web", "NetworkPolicy
    ns/db", "Profile kns.ns") in nft ``layer``, as Felix names it (an over-long, hashed name
    is not found)."""
    kind, _, scoped = policy.partition(" ")
    if not scoped:
        return None
    if kind == "Profile":
        prefix = PROFILE_INBOUND_PREFIX if ingress else PROFILE_OUTBOUND_PREFIX
        return f"{layer}-{prefix}{scoped}"
    namespace, _, name = scoped.rpartition("/")
    prefix = POLICY_INBOUND_PREFIX if ingress else POLICY_OUTBOUND_PREFIX
    return f"{layer}-{prefix}{policy_chain_id(kind, namespace, name)}"


def step_policy_chain(step: dict[str, Any], side_ingress: bool) -> str | None:
    """The policy chain of a rule step: in its host endpoint chain's layer and direction when
    it names one (``endpointChain``: a ``*`` forward chain on a workload's egress side is that
    endpoint's ingress, say), else the side's filter-layer chain."""
    root = step.get("endpointChain")
    if not root:
        return step_chain(step.get("policy", ""), side_ingress)
    layer, _, rest = root.partition("-")
    return step_chain(step.get("policy", ""), rest.startswith(_INBOUND_ENDPOINT), layer)


def host_endpoint_roots(side: dict[str, Any]) -> list[str]:
    """The host endpoint chains a computed side's steps were taken in, in order."""
    return list(dict.fromkeys(s["endpointChain"] for s in side["chain"] if s.get("endpointChain")))


def _list_chain(name: str) -> list[dict[str, Any]] | None:
    proc = subprocess.run(
        ["nft", "-j", "list", "chain", "inet", FELIX_TABLE, name],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return None
    try:
        objs = json.loads(proc.stdout).get("nftables", [])
    except ValueError:
        return None
    return [o["rule"] for o in objs if "rule" in o]


def _targets(rules: list[dict[str, Any]]) -> Iterator[str]:
    for rule in rules:
        for stmt in rule.get("expr", []):
            for verb in ("jump", "goto"):
                if isinstance(stmt, dict) and verb in stmt:
                    yield stmt[verb]["target"]


def _policy_targets(rules: list[dict[str, Any]]) -> Iterator[str]:
    """The chains ``rules`` jump to, a policy group chain replaced by the chains it jumps to."""
    for target in _targets(rules):
        if target.startswith(_GROUPS):
            yield from _targets(_list_chain(target) or [])
        else:
            yield target


def per_rule(rules: list[dict[str, Any]]) -> Counts:
    """Counts per rule index, summed over the counted nft rules carrying that index."""
    out: Counts = {}
    for rule in rules:
        index = rule_index(rule.get("comment"))
        if index is None:
            continue
        for stmt in rule.get("expr", []):
            counter = stmt.get("counter") if isinstance(stmt, dict) else None
            if isinstance(counter, dict):
                p, b = out.get(index, (0, 0))
                out[index] = (p + int(counter.get("packets", 0)), b + int(counter.get("bytes", 0)))
    return dict(sorted(out.items()))


def snapshot(roots: Iterable[str]) -> Snapshot:
    """Counts of the policy/profile chains each endpoint chain in ``roots`` jumps to (a root
    that is not programmed here maps to no chains)."""
    out: Snapshot = {}
    for root in roots:
        chains: dict[str, Counts] = {}
        for target in dict.fromkeys(_policy_targets(_list_chain(root) or [])):
            if target.startswith(_COUNTED):
                rules = _list_chain(target)
                if rules is not None:
                    chains[target] = per_rule(rules)
        out[root] = chains
    return out


def _entry(index: int, now: tuple[int, int], before: tuple[int, int]) -> dict[str, Any]:
    return {
        "ruleIndex": index,
        "packets": now[0],
        "bytes": now[1],
        "probePackets": now[0] - before[0],
        "probeBytes": now[1] - before[1],
    }


def _merged(snap: Snapshot, roots: list[str]) -> dict[str, Counts]:
    out: dict[str, Counts] = {}
    for root in roots:
        for name, counts in snap.get(root, {}).items():
            out.setdefault(name, counts)  # a policy chain two roots jump to is one chain
    return out


def report(
    sides: dict[str, str | None], before: Snapshot, after: Snapshot, computed: dict[str, Any],
    host_roots: dict[str, list[str]] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Per side (``egress``/``ingress`` -> its workload chain or None, plus ``host_roots``: the host
    endpoint chains of this node its steps were taken in): every chain's per-rule counts
    after the probe (and their change across it), and the computed chain's rule steps with the
    counts of the nft rules they became (``chain`` None when Felix has no such chain here)."""
    out: dict[str, Any] = {}
    for side, root in sides.items():
        roots = [r for r in (root, *(host_roots or {}).get(side, [])) if r]
        chains = _merged(after, roots)
        old = _merged(before, roots)
        listed = [
            {
                "chain": name,
                "rules": [
                    _entry(i, c, old.get(name, {}).get(i, (0, 0))) for i, c in counts.items()
                ],
            }
            for name, counts in chains.items()
        ]
        steps = []
        for step in computed[side]["chain"]:
            if step.get("step") != "rule":
                continue
            name = step_policy_chain(step, side == "ingress")
            index = step["ruleIndex"]
            item: dict[str, Any] = {"policy": step["policy"], "ruleIndex": index}
            if name in chains and index in chains[name]:
                prev = old.get(name, {}).get(index, (0, 0))
                item.update(_entry(index, chains[name][index], prev), chain=name)
            else:
                item["chain"] = None
            steps.append(item)
        out[side] = {"chain": root, "endpointChains": roots, "chains": listed, "steps": steps}
    return out
