"""NFLOG prefixes (upstream's form, hashing at 63 characters) and where flow-log rules render."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calico.felix.messages import Policy, PolicyID, Profile, Rule, TierInfo, WorkloadEndpoint
from calico.felix.rules import RenderConfig, RuleRenderer
from calico.felix.rules.nflog import (
    end_of_tier_prefix,
    maybe_hash,
    nflog,
    no_profile_prefix,
    rule_prefix,
)

ON = RuleRenderer(RenderConfig(flow_logs=True))
OFF = RuleRenderer(RenderConfig())
NP = PolicyID("db", "NetworkPolicy", namespace="prod", tier="default")
POLICY = Policy(
    namespace="prod",
    inbound_rules=(Rule(action="allow", protocol="tcp"), Rule(action="deny"), Rule(action="pass")),
    outbound_rules=(Rule(action="log"), Rule(action="allow")),
)


def logs(chain) -> list[dict]:
    """The NFLOG statements (a ``log`` action rule's kernel-log statement has no group)."""
    return [e["log"] for r in chain.rules for e in r.exprs if "group" in e.get("log", {})]


def test_prefix_forms() -> None:
    assert rule_prefix("allow", "P", True, 0, "np/prod/db") == "API0|np/prod/db"
    assert rule_prefix("deny", "R", False, 12, "kns.prod") == "DRE12|kns.prod"
    assert rule_prefix("next-tier", "P", True, 3, "gnp/x") == "PPI3|gnp/x"
    assert end_of_tier_prefix(True, "default") == "DPI|default"
    assert end_of_tier_prefix(False, "sec", "Pass") == "PPE|sec"
    assert no_profile_prefix(True) == "DRI"
    assert no_profile_prefix(False) == "DRE"
    assert nflog(False, "x") == {"log": {"prefix": "x", "group": 2, "snaplen": 80}}


def test_hash_boundary() -> None:
    short = "A" * 62
    assert maybe_hash(short) == short  # 62 fits
    exact = "API0|" + "n" * 58  # 63: hashed, so nobody can spoof a hashed prefix
    hashed = maybe_hash(exact)
    assert hashed != exact and len(hashed) <= 63
    assert hashed.startswith(exact[:10]) and hashed.endswith("_" + exact[-10:])


# No deadline: CI's loaded 2-core machine makes timings meaningless.
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=300))
def test_hash_always_fits_and_is_deterministic(name: str) -> None:
    p = rule_prefix("allow", "P", True, 7, name)
    assert len(p) <= 63
    assert p == rule_prefix("allow", "P", True, 7, name)
    if len("API7|" + name) < 63:
        assert p == "API7|" + name


def test_policy_rules_log_verdicts_with_rule_indexes() -> None:
    pi, po = ON.policy_chains(NP, POLICY)
    assert [g["prefix"] for g in logs(pi)] == [
        "API0|np/prod/db",
        "DPI1|np/prod/db",
        "PPI2|np/prod/db",
    ]
    assert {g["group"] for g in logs(pi)} == {1}
    # The log action is not a verdict: only the allow rule (index 1) is NFLOGged, in group 2.
    assert [(g["prefix"], g["group"]) for g in logs(po)] == [("APE1|np/prod/db", 2)]
    # Deny: NFLOG before the drop; allow: after the mark, before the return.
    deny_rule = pi.rules[1].exprs
    assert "log" in deny_rule[-2] and "drop" in deny_rule[-1]


def test_profile_rules_use_profile_owner() -> None:
    pri, pro = ON.profile_chains("kns.prod", Profile(inbound_rules=(Rule(action="allow"),)))
    assert [g["prefix"] for g in logs(pri)] == ["ARI0|kns.prod"]
    assert logs(pro) == []


def test_endpoint_chain_logs_end_of_tier_and_no_profile() -> None:
    tiers = (
        TierInfo("sec", ingress_policies=(NP,), default_action="Pass"),
        TierInfo("default", ingress_policies=(NP,)),
    )
    wep = WorkloadEndpoint(state="active", name="cali1", profile_ids=("kns.prod",), tiers=tiers)
    tw, fw = ON.workload_endpoint_chains("cali1", wep)
    assert [g["prefix"] for g in logs(tw)] == ["PPI|sec", "DPI|default", "DRI"]
    assert [g["prefix"] for g in logs(fw)] == ["DRE"]


def test_rules_without_flow_logs_are_unchanged() -> None:
    """Flow logs off renders exactly what it did before (no log statements at all), and on
    differs only by the inserted log statements."""
    wep = WorkloadEndpoint(
        state="active", name="cali1", profile_ids=("p",), tiers=(TierInfo("default", (NP,)),)
    )
    off = [*OFF.policy_chains(NP, POLICY), *OFF.workload_endpoint_chains("cali1", wep)]
    on = [*ON.policy_chains(NP, POLICY), *ON.workload_endpoint_chains("cali1", wep)]
    assert not any(logs(c) for c in off)
    for a, b in zip(off, on, strict=True):
        stripped = [
            [e for e in r.exprs if not ("log" in e and "group" in e["log"])] for r in b.rules
        ]
        assert [list(r.exprs) for r in a.rules] == stripped


SNP = PolicyID("would-deny", "StagedNetworkPolicy", namespace="prod", tier="default")
STAGED = Policy(
    namespace="prod", staged=True, inbound_rules=(Rule(action="log"), Rule(action="deny"))
)


def test_staged_policy_chains_only_with_flow_logs_and_only_report() -> None:
    assert OFF.policy_chains(SNP, STAGED) == []
    pi, po = ON.policy_chains(SNP, STAGED)
    assert pi.name == "filter-cali-pi-snp/prod/would-deny"
    # The log rule is dropped; the deny rule reports and returns: no drop, no mark.
    assert [list(r.exprs)[-2:] for r in pi.rules] == [
        [nflog(True, "DPI1|snp/prod/would-deny"), {"return": None}]
    ]
    assert po.rules == []
    assert ON.policy_chain_names(SNP, STAGED) == [pi.name, po.name]


def test_endpoint_chain_jumps_staged_policies_only_with_flow_logs() -> None:
    tiers = (TierInfo("sec", ingress_policies=(SNP,)), TierInfo("default", (SNP, NP)))
    wep = WorkloadEndpoint(state="active", name="cali1", tiers=tiers)
    off_tw = OFF.workload_endpoint_chains("cali1", wep)[0]
    on_tw = ON.workload_endpoint_chains("cali1", wep)[0]

    def jumps(chain) -> list[str]:
        return [e["jump"]["target"] for r in chain.rules for e in r.exprs if "jump" in e]

    assert jumps(off_tw) == ["filter-cali-pi-np/prod/db"]
    assert jumps(on_tw) == [
        "filter-cali-pi-snp/prod/would-deny",
        "filter-cali-pi-snp/prod/would-deny",
        "filter-cali-pi-np/prod/db",
    ]
    # The staged-only tier ends with a pass report, not a drop.
    assert [g["prefix"] for g in logs(on_tw)] == ["PPI|sec", "DPI|default", "DRI"]
