"""Rule IDs and rule counters in generated programs (BPFPolicyDebugEnabled), BPF parameters."""

from __future__ import annotations

import pytest

from calico.felix.bpf import mode
from calico.felix.bpf.polprog import EndpointPolicy, Generator, rule_id
from calico.felix.config.params import PARAMS
from calico.felix.messages import Policy, PolicyID, Profile, Rule, TierInfo


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) % 2**64
    return h


def test_fnv_constants_match_the_published_test_vectors() -> None:
    # FNV-1a 64 test vectors: "" and "a"
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert rule_id("policy t/ns/p", "inbound", 3, "abc") == fnv1a64(b"policy t/ns/p|inbound|3|abc")


def test_rule_id_changes_with_each_part() -> None:
    base = rule_id("policy t/ns/p", "inbound", 0, "h")
    others = {
        rule_id("policy t/ns/q", "inbound", 0, "h"),
        rule_id("policy t/ns/p", "outbound", 0, "h"),
        rule_id("policy t/ns/p", "inbound", 1, "h"),
        rule_id("policy t/ns/p", "inbound", 0, "i"),
    }
    assert base not in others and len(others) == 4


def _gen(counters: bool) -> tuple[Generator, EndpointPolicy]:
    pid = PolicyID("p", tier="default", namespace="ns")
    pols = {
        pid: Policy(
            inbound_rules=(
                Rule(action="deny", protocol="udp", rule_id="r0"),
                Rule(action="allow", rule_id="r1"),
                Rule(action="allow", ip_version=6, rule_id="v6only"),  # only in the v6 walk
            )
        )
    }
    profiles = {"prof": Profile(inbound_rules=(Rule(action="allow", rule_id="pr0"),))}
    gen = Generator(pols, profiles, lambda s: 1, rule_counters=counters)
    ep = EndpointPolicy((TierInfo("default", ingress_policies=(pid,)),), ("prof",), True)
    return gen, ep


def test_rules_listed_in_program_order_and_counted_only_with_policy_debug() -> None:
    gen, ep = _gen(True)
    src = gen.source(ep)
    assert [(r.owner, r.index, r.action, r.rule_hash) for r in gen.rules] == [
        ("policy default/ns/p", 0, "deny", "r0"),
        ("policy default/ns/p", 1, "allow", "r1"),
        ("policy default/ns/p", 2, "allow", "v6only"),  # listed once, at its place
        ("profile prof", 0, "allow", "pr0"),
    ]
    for r in gen.rules:
        assert f"cali_rule_hit(0x{r.id:016x}ULL);" in src
    # r0, r1, pr0 in both families' walks, v6only in the IPv6 walk only
    assert src.count("cali_rule_hit(") == 7
    # the hit comes after the rule's last criterion, right before its action
    deny = gen.rules[0]
    for v in (4, 6):
        want = f"goto v{v}_t0p0_r0_next;\n\tcali_rule_hit(0x{deny.id:016x}ULL);\n\tgoto v{v}_deny;"
        assert want in src
    gen2, ep2 = _gen(False)
    assert "cali_rule_hit" not in gen2.source(ep2)
    assert gen2.rules == gen.rules  # listed either way
    gen2.source(EndpointPolicy((), (), False))
    assert gen2.rules == []  # reset per source


@pytest.mark.parametrize(("raw", "level"), [("off", 0), ("Info", 1), ("DEBUG", 2)])
def test_bpf_log_level_parses_case_insensitively(raw: str, level: int) -> None:
    assert mode.LOG_LEVELS[PARAMS["BPFLogLevel"].parser.parse(raw)] == level


def test_bad_bpf_log_level_is_rejected_and_defaults() -> None:
    param = PARAMS["BPFLogLevel"]
    with pytest.raises(ValueError, match="valid: Off, Info, Debug"):
        param.parser.parse("verbose")
    assert param.default == "Off"
    assert PARAMS["BPFPolicyDebugEnabled"].default is True
