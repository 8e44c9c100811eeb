"""``canonical_json`` (calico.felix.nftables.state): orjson's fast path must write exactly the
stdlib reference's text, so rule hashes (and a restarted Felix's view of an unchanged table)
do not depend on which encoder wrote them."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from calico.felix.messages import (
    HostEndpoint,
    ICMPTypeCode,
    Policy,
    PolicyID,
    PortRange,
    Rule,
    TierInfo,
    WorkloadEndpoint,
)
from calico.felix.nftables import state
from calico.felix.nftables.model import NftRule
from calico.felix.nftables.state import canonical_json, rule_text
from calico.felix.rules import RenderConfig, RuleRenderer

reference = state._ENCODER.encode

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),  # past 64 bits: orjson refuses
    st.text(),  # any code point: non-ASCII goes to the reference
    st.text(alphabet=st.characters(max_codepoint=127)),  # ASCII, control characters too
)
trees = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=6), inner, max_size=4),
    ),
    max_leaves=20,
)


@given(trees)
def test_canonical_json_is_the_reference_text(value: Any) -> None:
    assert canonical_json(value) == reference(value)


def test_every_ascii_character_as_value_and_key_gives_the_reference_text() -> None:
    for code in range(128):
        c = chr(code)
        for value in ({"v": c, "w": f"a{c}b"}, {c: 1, f"k{c}": [c]}):
            assert canonical_json(value) == reference(value), code


def test_fallbacks_give_the_reference_text() -> None:
    for value in ({"a": "é"}, {"a": "\x7f"}, {"n": 2**70}, {1: "x"}, {"b": [{"a": "\u2028"}]}):
        assert canonical_json(value) == reference(value)
    assert canonical_json({"a": "é"}) == '{"a":"\\u00e9"}'


def _rendered_rules() -> list[NftRule]:
    """Rules of every kind the renderer writes: static chains, policies with rich matches in
    both families, endpoint chains of workloads and host endpoints, with and without flow
    logs."""
    pid = PolicyID("rich", "GlobalNetworkPolicy", tier="default")
    policy = Policy(
        inbound_rules=(
            Rule(
                "allow",
                protocol="tcp",
                src_net=("10.0.0.0/8", "fd00::/64"),
                dst_ports=(PortRange(80, 80), PortRange(8000, 8100)),
                src_ip_set_ids=("s:a",),
                not_dst_ip_set_ids=("s:b",),
            ),
            Rule("deny", protocol="icmp", icmp=ICMPTypeCode(8, 0)),
            Rule("log", protocol="udp", not_src_ports=(PortRange(53, 53),)),
            Rule("pass", dst_net=("192.0.2.1/32",)),
        ),
        outbound_rules=(Rule("allow", ip_version=6, protocol=58),),
    )
    tier = TierInfo("default", (pid,), (pid,))
    rules: list[NftRule] = []
    for config in (RenderConfig(), RenderConfig(flow_logs=True, deny_action="reject")):
        r = RuleRenderer(config)
        chains = [*r.static_chains(), *r.policy_chains(pid, policy)]
        chains += r.workload_endpoint_chains(
            "cali1", WorkloadEndpoint("active", "cali1", profile_ids=("p",), tiers=(tier,))
        )
        chains += r.host_endpoint_chains(
            "eth0",
            HostEndpoint(
                "eth0",
                ("p",),
                tiers=(tier,),
                untracked_tiers=(tier,),
                pre_dnat_tiers=(tier,),
                forward_tiers=(tier,),
            ),
        )
        rules += [rule for chain in chains for rule in chain.rules]
    return rules


def test_every_rendered_rule_text_is_the_reference_text() -> None:
    rules = _rendered_rules()
    assert len(rules) > 100
    for rule in rules:
        expected = reference({"comment": rule.comment, "expr": list(rule.exprs)})
        assert rule_text(NftRule(list(rule.exprs), rule.comment)) == expected
