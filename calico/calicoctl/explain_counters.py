"""Per-rule packet/byte counters of an endpoint's policy and profile chains, read from Felix's nft
table on this node for ``calicoctl explain --live``.

Felix counts the deciding nft rule of every policy/profile rule and writes the rule's index in
its comment (``calico.policyeval.chains``), so the counts of one rule's per-family copies add up
here. The chains read are the workload's own (``cali-fw-`` for egress, ``cali-tw-`` for ingress)
and the policy/profile chains they jump to, in jump order. Reads only; nothing is reset.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Iterator
from typing import Any

from calico.policyeval.chains import (
    FILTER_LAYER,
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
_COUNTED = tuple(
    f"{FILTER_LAYER}-{p}"
    for p in (
        POLICY_INBOUND_PREFIX,
        POLICY_OUTBOUND_PREFIX,
        PROFILE_INBOUND_PREFIX,
        PROFILE_OUTBOUND_PREFIX,
    )
)

Counts = dict[int, tuple[int, int]]  # rule index -> (packets, bytes)
Snapshot = dict[str, dict[str, Counts]]  # endpoint chain -> policy/profile chain -> counts


def endpoint_chain(iface: str, ingress: bool) -> str:
    return f"{FILTER_LAYER}-{WL_TO_PREFIX if ingress else WL_FROM_PREFIX}{iface}"


def step_chain(policy: str, ingress: bool) -> str | None:
    """The chain of a decision step's ``policy`` ("GlobalNetworkPolicy web", "NetworkPolicy
    ns/db", "Profile kns.ns"), as Felix names it (an over-long, hashed name is not found)."""
    kind, _, scoped = policy.partition(" ")
    if not scoped:
        return None
    if kind == "Profile":
        prefix = PROFILE_INBOUND_PREFIX if ingress else PROFILE_OUTBOUND_PREFIX
        return f"{FILTER_LAYER}-{prefix}{scoped}"
    namespace, _, name = scoped.rpartition("/")
    prefix = POLICY_INBOUND_PREFIX if ingress else POLICY_OUTBOUND_PREFIX
    return f"{FILTER_LAYER}-{prefix}{policy_chain_id(kind, namespace, name)}"


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
        for target in dict.fromkeys(_targets(_list_chain(root) or [])):
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


def report(
    sides: dict[str, str], before: Snapshot, after: Snapshot, computed: dict[str, Any]
) -> dict[str, Any]:
    """Per side (``egress``/``ingress`` -> its endpoint chain): every chain's per-rule counts
    after the probe (and their change across it), and the computed chain's rule steps with the
    counts of the nft rules they became (``chain`` None when Felix has no such chain here)."""
    out: dict[str, Any] = {}
    for side, root in sides.items():
        chains = after.get(root, {})
        old = before.get(root, {})
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
            name = step_chain(step.get("policy", ""), side == "ingress")
            index = step["ruleIndex"]
            item: dict[str, Any] = {"policy": step["policy"], "ruleIndex": index}
            if name in chains and index in chains[name]:
                prev = old.get(name, {}).get(index, (0, 0))
                item.update(_entry(index, chains[name][index], prev), chain=name)
            else:
                item["chain"] = None
            steps.append(item)
        out[side] = {"chain": root, "chains": listed, "steps": steps}
    return out
