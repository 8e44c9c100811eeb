"""Golden policy/profile chains: names, actions, per-family rendering, match blocks."""

from __future__ import annotations

from calico.felix.messages import Policy, PolicyID, PortRange, Profile, Rule
from calico.felix.nftables.model import NftRule
from calico.felix.rules import RenderConfig, RuleRenderer

MARK = {"meta": {"key": "mark"}}
V4 = {"match": {"op": "==", "left": {"meta": {"key": "nfproto"}}, "right": "ipv4"}}
TCP = {"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": 6}}
ALLOW = [{"mangle": {"key": MARK, "value": {"|": [MARK, 0x10000]}}}, {"return": None}]
PASS = [{"mangle": {"key": MARK, "value": {"|": [MARK, 0x20000]}}}, {"return": None}]
COUNT = {"counter": None}  # every deciding policy rule counts (calicoctl explain --live reads it)


def is_set(bit: int) -> dict:
    return {"match": {"op": "==", "left": {"&": [MARK, bit]}, "right": bit}}


def exprs(rules: list[NftRule]) -> list[list[dict]]:
    return [list(r.exprs) for r in rules]


def test_chain_names_and_layers() -> None:
    r = RuleRenderer()
    gnp = PolicyID("web", "GlobalNetworkPolicy", tier="default")
    np = PolicyID("db", "NetworkPolicy", namespace="prod")
    assert [c.name for c in r.policy_chains(gnp, Policy())] == [
        "filter-cali-pi-gnp/web",
        "filter-cali-po-gnp/web",
    ]
    assert [c.name for c in r.policy_chains(np, Policy())] == [
        "filter-cali-pi-np/prod/db",
        "filter-cali-po-np/prod/db",
    ]
    assert r.policy_chains(gnp, Policy(pre_dnat=True))[0].name == "mangle-cali-pi-gnp/web"
    assert r.policy_chains(gnp, Policy(untracked=True))[1].name == "raw-cali-po-gnp/web"
    assert r.policy_chain_names(gnp, Policy(untracked=True))[0] == "raw-cali-pi-gnp/web"
    assert [c.name for c in r.profile_chains("kns.prod", Profile())] == [
        "filter-cali-pri-kns.prod",
        "filter-cali-pro-kns.prod",
    ]
    staged = PolicyID("s", "StagedGlobalNetworkPolicy")
    assert r.policy_chains(staged, Policy()) == []
    long = PolicyID("x" * 300, "GlobalNetworkPolicy")
    name = r.policy_chains(long, Policy())[0].name
    assert name.startswith("filter-cali-pi-_") and len(name) < 240


def test_actions() -> None:
    r = RuleRenderer()
    pol = Policy(
        inbound_rules=(
            Rule("allow", protocol="tcp", rule_id="r1"),
            Rule("deny"),
            Rule("pass"),
            Rule("next-tier"),
            Rule("log"),
        )
    )
    inbound = r.policy_chains(PolicyID("p"), pol)[0]
    assert exprs(inbound.rules) == [
        [TCP, COUNT, *ALLOW],
        [COUNT, {"drop": None}],
        [COUNT, *PASS],
        [COUNT, *PASS],
        [COUNT, {"log": {"prefix": "calico-packet: "}}],
    ]
    # The comment carries the rule's index in its list (and its ID when it has one).
    comments = [r.comment for r in inbound.rules]
    assert comments == ["rule 0 r1", "rule 1", "rule 2", "rule 3", "rule 4"]


def test_reject_and_log_rate_limit_and_prefix() -> None:
    r = RuleRenderer(
        RenderConfig(deny_action="reject", log_rate_limit="5/minute", log_prefix="%t-%k-%n")
    )
    pid = PolicyID("web", "GlobalNetworkPolicy", tier="sec")
    inbound = r.policy_chains(pid, Policy(inbound_rules=(Rule("deny"), Rule("log"))))[0]
    assert exprs(inbound.rules) == [
        [COUNT, {"reject": None}],
        [
            COUNT,
            {"limit": {"rate": 5, "per": "minute", "burst": 5}},
            {"log": {"prefix": "sec-gnp-web: "}},
        ],
    ]
    # Outside the filter layer reject is not allowed by the kernel: drop instead.
    pre = r.policy_chains(pid, Policy(inbound_rules=(Rule("deny"),), pre_dnat=True))[0]
    assert exprs(pre.rules) == [[COUNT, {"drop": None}]]


def test_untracked_allow_notracks() -> None:
    r = RuleRenderer()
    inbound = r.policy_chains(
        PolicyID("p"), Policy(inbound_rules=(Rule("allow"),), untracked=True)
    )[0]
    assert exprs(inbound.rules) == [[COUNT, {"notrack": None}, *ALLOW]]


def test_family_specific_rules_render_per_family() -> None:
    r = RuleRenderer()
    rule = Rule("allow", src_net=("10.0.0.0/8", "fd00::/8"))
    inbound = r.policy_chains(PolicyID("p"), Policy(inbound_rules=(rule,)))[0]
    assert len(inbound.rules) == 2
    assert inbound.rules[0].exprs[0] == V4
    # Both families' rules carry the one policy rule's index: their counters add up to its.
    assert [r.comment for r in inbound.rules] == ["rule 0", "rule 0"]
    assert all(COUNT in r.exprs for r in inbound.rules)
    # v4 only: the v6 variant disappears and agnostic rules gain a family guard.
    only4 = r.policy_chains(PolicyID("p"), Policy(inbound_rules=(rule, Rule("deny"))), 4)[0]
    assert exprs(only4.rules)[1] == [V4, COUNT, {"drop": None}]
    assert [r.comment for r in only4.rules] == ["rule 0", "rule 1"]
    assert len(only4.rules) == 2
    # IPv6 disabled in config: same as asking for v4.
    r4 = RuleRenderer(RenderConfig(ipv6_enabled=False))
    assert exprs(r4.policy_chains(PolicyID("p"), Policy(inbound_rules=(rule,)))[0].rules) == exprs(
        r.policy_chains(PolicyID("p"), Policy(inbound_rules=(rule,)), 4)[0].rules
    )


def test_mixed_ports_use_scratch_mark_block() -> None:
    r = RuleRenderer()
    rule = Rule(
        "allow",
        protocol="tcp",
        src_named_port_ip_set_ids=("n:s",),
        src_ports=(PortRange(1, 1),),
        dst_ports=(PortRange(80, 80),),
        dst_named_port_ip_set_ids=("n:d",),
    )
    inbound = r.policy_chains(PolicyID("p"), Policy(inbound_rules=(rule,)), 4)[0]
    got = exprs(inbound.rules)
    s0, s1 = 0x80000, 0x100000
    clear = {"mangle": {"key": MARK, "value": {"&": [MARK, ~(s0 | s1) & 0xFFFFFFFF]}}}
    set0 = {"mangle": {"key": MARK, "value": {"|": [MARK, s0]}}}
    set1 = {"mangle": {"key": MARK, "value": {"|": [MARK, s1]}}}
    assert got[0] == [clear]
    assert got[1][-1] == set0 and got[2][-1] == set0  # two source alternatives
    assert got[3][0] == is_set(s0) and got[3][-1] == set1  # destination alternatives need s0
    assert got[4][0] == is_set(s0) and got[4][-1] == set1
    assert got[5] == [V4, TCP, is_set(s1), COUNT, *ALLOW]
    assert len(got) == 6
    # Only the deciding rule counts: the scratch rules see candidates, not matches.
    assert [COUNT in rule for rule in got] == [False] * 5 + [True]
    assert {r.comment for r in inbound.rules} == {"rule 0"}
