"""The endpoint-chain memo and the rule-text memo: shared rule objects for endpoints of one
shape, never a stale body for another shape, and the same canonical text as encoding afresh."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.messages import PolicyID, TierInfo
from calico.felix.nftables.model import NftRule
from calico.felix.nftables.state import render_chain, rule_text
from calico.felix.rules import exprs as x
from calico.felix.rules.config import RenderConfig
from calico.felix.rules.endpoints import _endpoint_rules, endpoint_chain

pids = st.builds(
    PolicyID,
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from(["NetworkPolicy", "StagedNetworkPolicy"]),
    st.just("ns"),
)
tiers = st.lists(
    st.builds(
        TierInfo,
        st.sampled_from(["default", "t1"]),
        st.lists(pids, max_size=3).map(tuple),
        st.lists(pids, max_size=3).map(tuple),
        st.sampled_from(["Deny", "Pass"]),
    ),
    max_size=2,
)
shapes = st.fixed_dictionaries(
    {
        "tiers": tiers,
        "inbound": st.booleans(),
        "profile_ids": st.lists(st.sampled_from(["kns.a", "kns.b"]), max_size=2),
        "admin_down": st.booleans(),
        "conntrack": st.booleans(),
    }
)
configs = st.sampled_from([RenderConfig(), RenderConfig(flow_logs=True)])


def fresh(config: RenderConfig, name: str, shape: dict) -> list[NftRule]:
    _endpoint_rules.cache_clear()
    return endpoint_chain(config, name, layer="filter", **shape).rules


@settings(max_examples=200)
@given(configs, shapes, shapes)
def test_memoised_chains_equal_fresh_ones(config: RenderConfig, one: dict, two: dict) -> None:
    a = endpoint_chain(config, "filter-cali-tw-a", layer="filter", **one)
    b = endpoint_chain(config, "filter-cali-tw-b", layer="filter", **two)
    assert a.name == "filter-cali-tw-a" and b.name == "filter-cali-tw-b"
    assert a.rules == fresh(config, "x", one) and b.rules == fresh(config, "y", two)
    again = endpoint_chain(config, "filter-cali-tw-c", layer="filter", **one)
    assert again.rules == a.rules
    if one == two:  # one shape: the same rule objects, so their text is encoded once
        assert all(r is s for r, s in zip(a.rules, b.rules, strict=True))


def test_rule_text_is_computed_once_and_canonical() -> None:
    rule = NftRule([x.match(x.meta("l4proto"), 6), x.ACCEPT], "c")
    reference = json.dumps(
        {"comment": "c", "expr": list(rule.exprs)}, sort_keys=True, separators=(",", ":")
    )
    assert rule_text(rule) == reference
    assert rule_text(rule) is rule_text(rule)
    assert NftRule(list(rule.exprs), "c") == rule  # the kept text is not part of equality


def test_rendered_chains_of_one_shape_differ_only_by_name() -> None:
    shape = {"tiers": [TierInfo("default", (PolicyID("a", "NetworkPolicy", "ns"),))]}
    a = render_chain(endpoint_chain(RenderConfig(), "n1", layer="filter", inbound=True, **shape))
    b = render_chain(endpoint_chain(RenderConfig(), "n2", layer="filter", inbound=True, **shape))
    assert [r[0] for r in a.rules] == [r[0] for r in b.rules]
    assert a.state.hashes != b.state.hashes  # the hash chain starts from the chain name
