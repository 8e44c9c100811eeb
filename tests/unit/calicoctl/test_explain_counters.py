"""explain --live's counter side: rule-index comments, chain names of decision steps, per-rule
sums over per-family copies, and the report/text built from two kernel snapshots."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from calico.calicoctl.explain_counters import (
    endpoint_chain,
    host_endpoint_roots,
    per_rule,
    report,
    step_chain,
    step_policy_chain,
)
from calico.calicoctl.explain_render import _live_counters, _side
from calico.policyeval.chains import policy_chain_id, rule_comment, rule_index


@given(st.integers(0, 10_000), st.text("abcXYZ019-_", max_size=16))
def test_rule_comment_round_trips_behind_the_hash(index: int, rule_id: str) -> None:
    human = rule_comment(index, rule_id)
    assert rule_index(human) == index
    assert rule_index(f"cali:AbCdEfGh01234567; {human}") == index


def test_rule_index_ignores_other_comments() -> None:
    for comment in (None, "", "cali:abc;", "cali:abc; Start of tier default", "rules 3", "rule x"):
        assert rule_index(comment) is None
    assert rule_index("cali:abc; rule 12") == 12
    assert rule_index("cali:abc; rule 12x") is None


def test_step_chains_follow_felix_naming() -> None:
    assert step_chain("GlobalNetworkPolicy web", True) == "filter-cali-pi-gnp/web"
    assert step_chain("NetworkPolicy prod/db", False) == "filter-cali-po-np/prod/db"
    assert step_chain("KubernetesNetworkPolicy prod/db", True) == "filter-cali-pi-knp/prod/db"
    assert step_chain("Profile kns.prod", True) == "filter-cali-pri-kns.prod"
    assert step_chain("Profile kns.prod", False) == "filter-cali-pro-kns.prod"
    assert step_chain("", True) is None
    assert policy_chain_id("", "ns", "p") == "np/ns/p" and policy_chain_id("", "", "p") == "gnp/p"
    assert endpoint_chain("cali1", ingress=True) == "filter-cali-tw-cali1"
    assert endpoint_chain("cali1", ingress=False) == "filter-cali-fw-cali1"


def _rule(comment: str | None, *counts: tuple[int, int]) -> dict:
    expr: list[dict] = [{"match": {}}]
    expr += [{"counter": {"packets": p, "bytes": b}} for p, b in counts]
    return {"comment": comment, "expr": [*expr, {"drop": None}]}


def test_per_rule_sums_family_copies_and_skips_uncounted_rules() -> None:
    rules = [
        _rule("cali:a; rule 0 id0", (2, 100)),  # IPv4 copy
        _rule("cali:b; rule 0 id0", (1, 60)),  # IPv6 copy of the same rule
        _rule("cali:c; rule 1"),  # a scratch rule: no counter
        _rule("cali:d; rule 2", (0, 0)),
        _rule("cali:e;", (9, 9)),  # not one of ours
    ]
    assert per_rule(rules) == {0: (3, 160), 2: (0, 0)}


COMPUTED = {
    "egress": {"chain": [{"step": "default", "action": "Deny"}]},
    "ingress": {
        "chain": [
            {"step": "rule", "action": "Log", "tier": "t", "policy": "GlobalNetworkPolicy a",
             "ruleIndex": 0, "rule": {"action": "Log"}},
            {"step": "rule", "action": "Deny", "tier": "t", "policy": "GlobalNetworkPolicy a",
             "ruleIndex": 1, "rule": {"action": "Deny"}},
            {"step": "rule", "action": "Allow", "policy": "Profile gone", "ruleIndex": 0,
             "rule": {"action": "Allow"}},
        ]
    },
}  # fmt: skip


def test_report_gives_counts_and_probe_deltas_per_step_and_chain() -> None:
    pi = "filter-cali-pi-gnp/a"
    before = {"filter-cali-tw-w": {pi: {0: (5, 500), 1: (1, 40)}}}
    after = {"filter-cali-tw-w": {pi: {0: (6, 542), 1: (2, 82)}}}
    out = report({"ingress": "filter-cali-tw-w"}, before, after, COMPUTED)
    ing = out["ingress"]
    assert ing["chain"] == "filter-cali-tw-w"
    assert ing["chains"] == [
        {
            "chain": pi,
            "rules": [
                {"ruleIndex": 0, "packets": 6, "bytes": 542, "probePackets": 1, "probeBytes": 42},
                {"ruleIndex": 1, "packets": 2, "bytes": 82, "probePackets": 1, "probeBytes": 42},
            ],
        }
    ]
    assert [(s["policy"], s["ruleIndex"], s["chain"]) for s in ing["steps"]] == [
        ("GlobalNetworkPolicy a", 0, pi),
        ("GlobalNetworkPolicy a", 1, pi),
        ("Profile gone", 0, None),  # computed, but Felix has no such chain here: drift
    ]
    assert "egress" not in out  # only the sides whose endpoint is on this node
    # A chain that appeared during the probe counts from zero.
    fresh = report({"ingress": "filter-cali-tw-w"}, {}, after, COMPUTED)
    assert fresh["ingress"]["steps"][1]["probePackets"] == 2


def test_text_shows_counters_next_to_each_rule_step() -> None:
    pi = "filter-cali-pi-gnp/a"
    after = {"filter-cali-tw-w": {pi: {0: (6, 542), 1: (2, 82)}}}
    live = report({"ingress": "filter-cali-tw-w"}, after, after, COMPUTED)["ingress"]
    side = {"endpoint": "workloadendpoint ns/w", "verdict": "Deny", **COMPUTED["ingress"]}
    lines = _side("Ingress", side, live=live)
    assert lines[1].endswith("[counters: 6 packets, 542 bytes (probe +0 packets, +0 bytes)]")
    assert lines[2].endswith("[counters: 2 packets, 82 bytes (probe +0 packets, +0 bytes)]")
    assert lines[3].endswith("[counters: no such chain on this node]")
    assert all("counters" not in ln for ln in _side("Ingress", side))  # offline: none


def test_host_endpoint_steps_map_to_their_layer_and_direction() -> None:
    """A step taken in a host endpoint chain names it (``endpointChain``): the policy chain is
    in that chain's layer, and in its direction (``*``'s from-HEP forward chain on a
    workload's egress side holds that endpoint's ingress policy)."""
    rule = {"step": "rule", "policy": "GlobalNetworkPolicy f", "ruleIndex": 0}
    cases = {
        "filter-cali-fhfw-any-interface-at-all": "filter-cali-pi-gnp/f",
        "filter-cali-thfw-eth0": "filter-cali-po-gnp/f",
        "filter-cali-fh-eth0": "filter-cali-pi-gnp/f",
        "filter-cali-th-eth0": "filter-cali-po-gnp/f",
        "mangle-cali-fh-eth0": "mangle-cali-pi-gnp/f",
        "raw-cali-th-eth0": "raw-cali-po-gnp/f",
    }
    for root, chain in cases.items():
        for side_ingress in (True, False):  # the side does not matter, the chain does
            assert step_policy_chain({**rule, "endpointChain": root}, side_ingress) == chain
    assert step_policy_chain(rule, False) == "filter-cali-po-gnp/f"  # a workload's own step
    prof = {"step": "rule", "policy": "Profile p", "endpointChain": "filter-cali-fh-eth0"}
    assert step_policy_chain(prof, False) == "filter-cali-pri-p"
    side = {"chain": [{**rule, "endpointChain": "filter-cali-fhfw-any-interface-at-all"}, rule,
                      {**rule, "endpointChain": "filter-cali-thfw-eth0"},
                      {"step": "default", "endpointChain": "filter-cali-thfw-eth0"}]}  # fmt: skip
    assert host_endpoint_roots(side) == [
        "filter-cali-fhfw-any-interface-at-all",
        "filter-cali-thfw-eth0",
    ]


def test_report_reads_host_endpoint_chains_of_the_side() -> None:
    fw, thfw = "filter-cali-fw-w", "filter-cali-thfw-eth0"
    po_f, pro = "filter-cali-po-gnp/f", "filter-cali-pro-kns.ns"
    computed = {
        "egress": {
            "chain": [
                {"step": "rule", "policy": "Profile kns.ns", "ruleIndex": 0},
                {"step": "rule", "policy": "GlobalNetworkPolicy f", "ruleIndex": 1,
                 "endpointChain": thfw},
            ]
        }
    }  # fmt: skip
    before = {fw: {pro: {0: (3, 300)}}, thfw: {po_f: {0: (0, 0), 1: (7, 700)}}}
    after = {fw: {pro: {0: (4, 400)}}, thfw: {po_f: {0: (0, 0), 1: (8, 800)}}}
    out = report({"egress": fw}, before, after, computed, {"egress": [thfw]})["egress"]
    assert out["chain"] == fw and out["endpointChains"] == [fw, thfw]
    assert [c["chain"] for c in out["chains"]] == [pro, po_f]
    assert [(s["chain"], s["probePackets"], s["packets"]) for s in out["steps"]] == [
        (pro, 1, 4),
        (po_f, 1, 8),
    ]
    live = {**out}
    lines = _live_counters("egress", live)
    assert lines[0] == f"  egress counters ({fw}, {thfw}):"


def test_snapshot_follows_policy_group_chains_to_their_policies(monkeypatch) -> None:
    from calico.calicoctl import explain_counters

    def jumps(*targets: str) -> list[dict]:
        return [{"expr": [{"jump": {"target": t}}]} for t in targets]

    kernel = {
        "filter-cali-tw-cali1": jumps("filter-cali-gi-abc", "filter-cali-pi-gnp/solo"),
        "filter-cali-gi-abc": jumps("filter-cali-pi-gnp/a", "filter-cali-pi-gnp/b"),
        "filter-cali-pi-gnp/a": [_rule("cali:x; rule 0", (4, 40))],
        "filter-cali-pi-gnp/b": [_rule("cali:y; rule 0", (1, 10))],
        "filter-cali-pi-gnp/solo": [],
    }
    monkeypatch.setattr(explain_counters, "_list_chain", kernel.get)
    snap = explain_counters.snapshot(["filter-cali-tw-cali1"])
    assert snap == {
        "filter-cali-tw-cali1": {
            "filter-cali-pi-gnp/a": {0: (4, 40)},
            "filter-cali-pi-gnp/b": {0: (1, 10)},
            "filter-cali-pi-gnp/solo": {},
        }
    }
