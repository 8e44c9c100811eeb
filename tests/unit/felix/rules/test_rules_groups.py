"""Policy groups (calico.felix.rules.groups): run splitting against a reference, group chain
shape at the return-stride boundaries, and verdict equivalence of grouped and ungrouped endpoint
chains under a small interpreter of the mark protocol (hypothesis)."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.messages import PolicyID, TierInfo, WorkloadEndpoint
from calico.felix.nftables.model import Chain, NftRule
from calico.felix.rules import RenderConfig, RuleRenderer
from calico.felix.rules.exprs import DROP, RETURN, mark_set
from calico.felix.rules.groups import (
    RETURN_STRIDE,
    group_chain,
    group_chain_name,
    group_runs,
    is_group_chain,
)
from calico.felix.rules.policy import policy_chain_name

CFG = RenderConfig()
FLOWS = RenderConfig(flow_logs=True)


def pid(i: int, staged: bool = False) -> PolicyID:
    kind = "StagedGlobalNetworkPolicy" if staged else "GlobalNetworkPolicy"
    return PolicyID(f"p{i}", kind, tier="default")


def reference_runs(ids: list[PolicyID], keys: dict[PolicyID, Any]) -> tuple[int, ...]:
    """Runs by itertools.groupby, every staged or keyless policy in a group of its own."""
    out: list[int] = []
    tagged = [(keys.get(p) if not p.kind.startswith("Staged") else None, p) for p in ids]
    for k, items in itertools.groupby(tagged, key=lambda t: t[0]):
        n = len(list(items))
        out += [1] * n if k is None else [n]
    return tuple(out)


policy_lists = st.lists(
    st.tuples(st.sampled_from(["a", "b", None]), st.booleans()), max_size=30
).map(lambda xs: [(k, pid(i, staged and i % 3 == 0)) for i, (k, staged) in enumerate(xs)])


@given(policy_lists)
def test_group_runs_match_the_groupby_reference(items: list[tuple[Any, PolicyID]]) -> None:
    ids = [p for _, p in items]
    keys = {p: k for k, p in items if k is not None}
    runs = group_runs(ids, keys.get)
    assert runs == reference_runs(ids, keys)
    assert sum(runs) == len(ids)
    assert group_runs(ids, None) == (1,) * len(ids)


def test_group_chain_returns_on_verdict_before_every_stride_th_policy() -> None:
    for n in (RETURN_STRIDE - 1, RETURN_STRIDE, RETURN_STRIDE + 1, 2 * RETURN_STRIDE + 1):
        ids = tuple(pid(i) for i in range(n))
        chain = group_chain(CFG, "default", ids, True, "filter")
        returns = [i for i, r in enumerate(chain.rules) if r.comment == "Return on verdict"]
        # One check before policy 5, 10, ...: at rule positions 5, 11, 17 (each check shifts).
        expected = [k * (RETURN_STRIDE + 1) - 1 for k in range(1, (n - 1) // RETURN_STRIDE + 1)]
        assert returns == expected, n
        assert len(chain.rules) == n + len(expected)
        targets = [r.exprs[-1]["jump"]["target"] for r in chain.rules if "jump" in r.exprs[-1]]
        assert targets == [policy_chain_name(p, True) for p in ids]
        # The first policy after each check (and the very first) is jumped to unconditionally.
        firsts = [i for i, r in enumerate(chain.rules) if len(r.exprs) == 1]
        assert len(firsts) == 1 + len(expected)


def test_group_chain_name_is_per_tier_direction_layer_and_policy_list() -> None:
    ids = (pid(1), pid(2))
    name = group_chain_name("default", ids, True, "filter")
    assert name.startswith("filter-cali-gi-") and is_group_chain(name)
    assert group_chain_name("default", ids, False, "filter").startswith("filter-cali-go-")
    assert group_chain_name("default", ids, True, "raw").startswith("raw-cali-gi-")
    others = {
        group_chain_name("other", ids, True, "filter"),
        group_chain_name("default", ids[::-1], True, "filter"),
        group_chain_name("default", (*ids, pid(3)), True, "filter"),
    }
    assert name not in others and len(others) == 3
    assert not is_group_chain("filter-cali-pi-gnp/x") and not is_group_chain("cali-gi-x")


def test_endpoint_chain_jumps_once_per_group_and_lists_each_group_chain_once() -> None:
    ids = tuple(pid(i) for i in range(12))
    tier = TierInfo("default", ingress_policies=ids, egress_policies=ids[:1])
    ep = WorkloadEndpoint("active", "cali1", tiers=(tier,))
    keys = {p: ("", "all()") for p in ids}
    chains = RuleRenderer(CFG).workload_endpoint_chains("cali1", ep, group_key=keys.get)
    tw, fw, *groups = chains
    assert [g.name for g in groups] == [group_chain_name("default", ids, True, "filter")]
    jumps = [r.exprs[-1]["jump"]["target"] for r in tw.rules if "jump" in r.exprs[-1]]
    assert jumps == [groups[0].name]
    # A single-policy run (the egress side) is not a group: a direct jump as before.
    assert policy_chain_name(ids[0], False) in str(fw.rules)
    # Without a key, the chains are exactly the ungrouped ones.
    plain = RuleRenderer(CFG).workload_endpoint_chains("cali1", ep)
    assert len(plain) == 2 and not any(is_group_chain(c.name) for c in plain)
    # An admin-down endpoint has no groups at all.
    down = WorkloadEndpoint("down", "cali1", tiers=(tier,))
    assert len(RuleRenderer(CFG).workload_endpoint_chains("cali1", down, group_key=keys.get)) == 2


# ---- a small interpreter of the mark protocol ------------------------------------------------

MARK_KEY = {"meta": {"key": "mark"}}


def _matches(expr: dict[str, Any], mark: int) -> bool:
    m = expr["match"]
    left = m["left"]
    if not (isinstance(left, dict) and "&" in left and left["&"][0] == MARK_KEY):
        return False  # ct state etc.: the packet is new and matches nothing else
    value = mark & left["&"][1]
    return value == m["right"] if m["op"] == "==" else value != m["right"]


def run(chains: dict[str, Chain], name: str, mark: int = 0) -> tuple[str, int]:
    """(verdict, mark) of traversing ``name``: verdict "accept"/"drop"/"return" (end or
    return), jumps followed, log statements ignored."""
    for rule in chains[name].rules:
        for expr in rule.exprs:
            if "match" in expr:
                if not _matches(expr, mark):
                    break
            elif "mangle" in expr:
                op, (_, bits) = next(iter(expr["mangle"]["value"].items()))
                mark = mark & bits if op == "&" else mark | bits
            elif "jump" in expr:
                verdict, mark = run(chains, expr["jump"]["target"], mark)
                if verdict != "return":
                    return verdict, mark
            elif "return" in expr:
                return "return", mark
            elif "accept" in expr:
                return "accept", mark
            elif "drop" in expr or "reject" in expr:
                return "drop", mark
    return "return", mark


OUTCOMES = ("none", "accept", "pass", "deny")


def policy_chain(cfg: RenderConfig, p: PolicyID, outcome: str) -> Chain:
    rules = {
        "none": [],
        "accept": [NftRule([mark_set(cfg.mark_accept), RETURN])],
        "pass": [NftRule([mark_set(cfg.mark_pass), RETURN])],
        "deny": [NftRule([DROP])],
    }[outcome]
    return Chain(policy_chain_name(p, True), rules)


tier_shapes = st.lists(
    st.tuples(
        st.lists(
            st.tuples(st.sampled_from(OUTCOMES), st.sampled_from(["a", "b", None]), st.booleans()),
            max_size=14,
        ),
        st.sampled_from(["Deny", "Pass"]),
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=300, deadline=None)
@given(tier_shapes, st.booleans(), st.booleans())
def test_grouped_chains_give_the_ungrouped_verdict(
    shape: list[tuple[list[tuple[str, Any, bool]], str]], flow_logs: bool, profile: bool
) -> None:
    cfg = FLOWS if flow_logs else CFG
    tiers, keys, policy_chains, n = [], {}, {}, 0
    for t, (items, default_action) in enumerate(shape):
        ids = []
        for outcome, key, staged in items:
            p = PolicyID(f"p{n}", "StagedGlobalNetworkPolicy" if staged else "", tier=f"t{t}")
            n += 1
            ids.append(p)
            if key is not None:
                keys[p] = key
            # A staged policy's chain never decides (it only logs).
            c = policy_chain(cfg, p, "none" if staged else outcome)
            policy_chains[c.name] = c
        tiers.append(TierInfo(f"t{t}", tuple(ids), (), default_action))
    profiles = ("prof",) if profile else ()
    ep = WorkloadEndpoint("active", "cali1", tiers=tuple(tiers), profile_ids=profiles)
    accept_profile = Chain("filter-cali-pri-prof", [NftRule([mark_set(cfg.mark_accept), RETURN])])
    r = RuleRenderer(cfg)
    verdicts = []
    for key in (None, keys.get):
        chains = {**policy_chains, accept_profile.name: accept_profile}
        rendered = r.workload_endpoint_chains("cali1", ep, group_key=key)
        chains.update({c.name: c for c in rendered})
        verdicts.append(run(chains, rendered[0].name)[0])
    assert verdicts[0] == verdicts[1]
