"""Golden endpoint chains: conntrack, tiers, pass/accept marks, profiles, HEP variants."""

from __future__ import annotations

from calico.felix.messages import HostEndpoint, PolicyID, TierInfo, WorkloadEndpoint
from calico.felix.nftables.model import Chain
from calico.felix.rules import RenderConfig, RuleRenderer

MARK = {"meta": {"key": "mark"}}
ACCEPT_BIT, PASS_BIT = 0x10000, 0x20000


def clear(bits: int) -> dict:
    return {"mangle": {"key": MARK, "value": {"&": [MARK, ~bits & 0xFFFFFFFF]}}}


def is_set(bit: int) -> dict:
    return {"match": {"op": "==", "left": {"&": [MARK, bit]}, "right": bit}}


def is_clear(bit: int) -> dict:
    return {"match": {"op": "==", "left": {"&": [MARK, bit]}, "right": 0}}


CT_EST = [
    {"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": ["established", "related"]}},
    {"accept": None},
]
CT_INV = [
    {"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": ["invalid"]}},
    {"drop": None},
]
DROP = [{"drop": None}]
RET_IF_ACCEPTED = [is_set(ACCEPT_BIT), {"return": None}]


def jump(t: str) -> dict:
    return {"jump": {"target": t}}


def body(chain: Chain) -> list[list[dict]]:
    return [list(r.exprs) for r in chain.rules]


P1 = PolicyID("p1", "GlobalNetworkPolicy", tier="t1")
P2 = PolicyID("p2", "NetworkPolicy", namespace="ns", tier="t1")
STAGED = PolicyID("s", "StagedGlobalNetworkPolicy", tier="t2")


def test_workload_chain_golden() -> None:
    ep = WorkloadEndpoint(
        "active",
        "cali1",
        profile_ids=("kns.ns",),
        tiers=(
            TierInfo("t1", (P1, P2), (P1,), "Deny"),
            TierInfo("t2", (STAGED,), ()),  # only staged: no jumps, no tier drop
            TierInfo("t3", (), (P2,), "Pass"),
        ),
    )
    tw, fw = RuleRenderer().workload_endpoint_chains("cali1", ep, (4, 6))
    assert tw.name == "filter-cali-tw-cali1" and fw.name == "filter-cali-fw-cali1"
    assert body(tw) == [
        CT_EST,
        CT_INV,
        [clear(ACCEPT_BIT | PASS_BIT)],
        [clear(PASS_BIT)],
        [is_clear(PASS_BIT), jump("filter-cali-pi-gnp/p1")],
        RET_IF_ACCEPTED,
        [is_clear(PASS_BIT), jump("filter-cali-pi-np/ns/p2")],
        RET_IF_ACCEPTED,
        [is_clear(PASS_BIT), {"drop": None}],
        [jump("filter-cali-pri-kns.ns")],
        RET_IF_ACCEPTED,
        DROP,
    ]
    assert tw.rules[3].comment == "Start of tier t1"
    # Egress: t1 has p1; t3 has p2 but default Pass -> no end-of-tier drop.
    assert body(fw)[3:] == [
        [clear(PASS_BIT)],
        [is_clear(PASS_BIT), jump("filter-cali-po-gnp/p1")],
        RET_IF_ACCEPTED,
        [is_clear(PASS_BIT), {"drop": None}],
        [clear(PASS_BIT)],
        [is_clear(PASS_BIT), jump("filter-cali-po-np/ns/p2")],
        RET_IF_ACCEPTED,
        [jump("filter-cali-pro-kns.ns")],
        RET_IF_ACCEPTED,
        DROP,
    ]


def test_no_policy_no_profile_denies_and_admin_down() -> None:
    r = RuleRenderer()
    tw, _ = r.workload_endpoint_chains("cali1", WorkloadEndpoint("active", "cali1"))
    assert body(tw) == [CT_EST, CT_INV, [clear(ACCEPT_BIT | PASS_BIT)], DROP]
    tw, fw = r.workload_endpoint_chains("cali1", WorkloadEndpoint("down", "cali1", ("p",)))
    assert body(tw) == body(fw) == [DROP]


def test_reject_and_no_invalid_check() -> None:
    r = RuleRenderer(RenderConfig(deny_action="reject", disable_conntrack_invalid_check=True))
    tw, _ = r.workload_endpoint_chains("cali1", WorkloadEndpoint("active", "cali1"))
    assert body(tw) == [CT_EST, [clear(ACCEPT_BIT | PASS_BIT)], [{"reject": None}]]


def test_host_endpoint_chains() -> None:
    pre = PolicyID("pre", "GlobalNetworkPolicy")
    unt = PolicyID("unt", "GlobalNetworkPolicy")
    hep = HostEndpoint(
        "eth0",
        tiers=(TierInfo("default", (P1,), ()),),
        pre_dnat_tiers=(TierInfo("default", (pre,)),),
        untracked_tiers=(TierInfo("default", (), (unt,)),),
        forward_tiers=(TierInfo("default", (), (P1,)),),
    )
    chains = {c.name: c for c in RuleRenderer().host_endpoint_chains("eth0", hep)}
    assert sorted(chains) == [
        "filter-cali-fh-eth0",
        "filter-cali-fhfw-eth0",
        "filter-cali-th-eth0",
        "filter-cali-thfw-eth0",
        "mangle-cali-fh-eth0",
        "raw-cali-fh-eth0",
        "raw-cali-th-eth0",
    ]
    fh = body(chains["filter-cali-fh-eth0"])
    assert fh[3] == [jump("filter-cali-failsafe-in")]
    assert fh[-1] == DROP
    th = body(chains["filter-cali-th-eth0"])
    assert th == [
        CT_EST,
        CT_INV,
        [clear(ACCEPT_BIT | PASS_BIT)],
        [jump("filter-cali-failsafe-out")],
        DROP,
    ]
    # Forward: no ingress forward policy -> allowed (no deny); egress has one -> deny at the end.
    assert body(chains["filter-cali-fhfw-eth0"]) == [CT_EST, CT_INV, [clear(ACCEPT_BIT | PASS_BIT)]]
    assert body(chains["filter-cali-thfw-eth0"])[-1] == DROP
    # Pre-DNAT: no conntrack, failsafe first, no default deny anywhere.
    assert body(chains["mangle-cali-fh-eth0"]) == [
        [clear(ACCEPT_BIT | PASS_BIT)],
        [jump("mangle-cali-failsafe-in")],
        [clear(PASS_BIT)],
        [is_clear(PASS_BIT), jump("mangle-cali-pi-gnp/pre")],
        RET_IF_ACCEPTED,
    ]
    assert body(chains["raw-cali-th-eth0"])[1:3] == [
        [jump("raw-cali-failsafe-out")],
        [clear(PASS_BIT)],
    ]
    assert body(chains["raw-cali-fh-eth0"]) == [
        [clear(ACCEPT_BIT | PASS_BIT)],
        [jump("raw-cali-failsafe-in")],
    ]
    # A HEP without special tiers only gets filter chains.
    plain = RuleRenderer().host_endpoint_chains("eth1", HostEndpoint("eth1"))
    assert {c.name.split("-")[0] for c in plain} == {"filter"}
