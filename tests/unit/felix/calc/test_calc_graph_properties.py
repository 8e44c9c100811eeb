"""Property test: the incremental graph's message stream converges on the oracle's state.

Random sequences of creates/updates/deletes over a small universe (local and remote endpoints,
host endpoints, profiles, policies of several kinds in three tiers, tiers, network sets), with
InSync and flushes at random points. After a final flush we require:

* applying every emitted message to an empty dataplane state equals ``desired_state`` of the
  final snapshot (computed from scratch);
* no message ever referenced an IP set, policy or profile not sent before it, and nothing
  endpoint-related was emitted before the syncer reported InSync.

Values are built in upstream's v1 JSON shape and decoded with the model's value codec (the
scenario tests go through the real processors).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import ENDPOINT_MESSAGES, DataplaneState, desired_state

from calico.felix.calc.calc_graph import build_felix_calc_pipeline
from calico.felix.calc.rule_scanner import parse_policy
from calico.felix.messages import PolicyPrepare
from calico.model import (
    HostEndpointKey,
    NetworkSetKey,
    PolicyKey,
    ProfileLabelsKey,
    ProfileRulesKey,
    TierKey,
    WorkloadEndpointKey,
)
from calico.model.values import decode_value
from calico.syncer.api import SyncStatus, Update, UpdateType

HOST = "h1"
LABEL_KEYS = ("a", "b")
LABEL_VALUES = ("x", "y")
SELECTORS = (
    'a == "x"',
    "has(b)",
    "!has(a)",
    'a in {"x", "y"}',
    "all()",
    'b != "y"',
    "",
    'a == "x" && b == "y"',
    'a == "y" || has(b)',
)
IPS = ("10.0.0.1", "10.0.0.2", "10.0.0.3", "fd00::1")
NETS = ("10.1.0.0/16", "0.0.0.0/0", "10.0.0.1/32", "10.0.0.0/8")
PORT_NAMES = ("http", "dns")
PROFILES = ("prof1", "prof2", "kns.ns1")
TIERS = ("default", "t1", "t2")

WEP_KEYS = tuple(
    WorkloadEndpointKey(host, "k8s", f"ns1/pod{i}", "eth0")
    for i, host in enumerate(("h1", "h1", "h1", "h2", "h2"))
)
HEP_KEYS = (HostEndpointKey("h1", "hep0"), HostEndpointKey("h2", "hep1"))
POLICY_KEYS = (
    PolicyKey("GlobalNetworkPolicy", "", "gp0"),
    PolicyKey("GlobalNetworkPolicy", "", "gp1"),
    PolicyKey("GlobalNetworkPolicy", "", "gp2"),
    PolicyKey("StagedGlobalNetworkPolicy", "", "gp0"),
    PolicyKey("NetworkPolicy", "ns1", "np0"),
    PolicyKey("NetworkPolicy", "ns2", "np0"),
)
NETSET_KEYS = (NetworkSetKey("gns0"), NetworkSetKey("ns1/ns0"))

labels = st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), max_size=2)
selectors = st.sampled_from(SELECTORS)
named_port = st.fixed_dictionaries(
    {
        "name": st.sampled_from(PORT_NAMES),
        "protocol": st.sampled_from(("tcp", "udp", "sctp", 6)),
        "port": st.sampled_from((53, 80, 8080)),
    }
)


@st.composite
def rule(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {"action": draw(st.sampled_from(("allow", "deny", "next-tier", "log")))}
    if draw(st.booleans()):
        out["protocol"] = draw(st.sampled_from(("tcp", "udp", 6)))
    for side in ("src", "dst"):
        if draw(st.booleans()):
            out[f"{side}_selector"] = draw(selectors.filter(bool))
        if draw(st.integers(0, 3)) == 0:
            out[f"!{side}_selector"] = draw(selectors.filter(bool))
        if "protocol" in out and draw(st.booleans()):
            ports = draw(st.lists(st.sampled_from((80, "1000:2000", *PORT_NAMES)), max_size=2))
            if ports:
                out[f"{side}_ports"] = ports
        if "protocol" in out and draw(st.integers(0, 4)) == 0:
            out[f"!{side}_ports"] = [draw(st.sampled_from(PORT_NAMES))]
        if draw(st.integers(0, 3)) == 0:
            out[f"{side}_nets"] = [draw(st.sampled_from(NETS))]
    return out


rules = st.lists(rule(), max_size=2)


@st.composite
def policy_value(draw: st.DrawFn, key: PolicyKey) -> dict[str, Any]:
    out: dict[str, Any] = {"tier": draw(st.sampled_from(TIERS)), "selector": draw(selectors)}
    if key.namespace:
        out["namespace"] = key.namespace
        ns_clause = f"projectcalico.org/namespace == '{key.namespace}'"
        out["selector"] = f"({out['selector']}) && {ns_clause}" if out["selector"] else ns_clause
    if draw(st.integers(0, 9)) == 0:
        out["selector"] = "a == "  # invalid: must behave as a deletion
    if (order := draw(st.sampled_from((None, 1, 2, 2.5)))) is not None:
        out["order"] = order
    if inbound := draw(rules):
        out["inbound_rules"] = inbound
    if outbound := draw(rules):
        out["outbound_rules"] = outbound
    if types := draw(st.sampled_from(((), ("ingress",), ("egress",), ("ingress", "egress")))):
        out["types"] = list(types)
    if not key.namespace:
        flag = draw(st.sampled_from((None, None, "untracked", "pre_dnat")))
        if flag:
            out[flag] = True
        if draw(st.booleans()):
            out["apply_on_forward"] = True
    if key.kind.startswith("Staged"):
        out["staged_action"] = "Set"
    if draw(st.integers(0, 9)) == 0:
        out["performance_hints"] = ["AssumeNeededOnEveryNode"]
    return out


@st.composite
def wep_value(draw: st.DrawFn) -> dict[str, Any]:
    ips = draw(st.lists(st.sampled_from(IPS), min_size=1, max_size=2, unique=True))
    out: dict[str, Any] = {
        "state": "active",
        "name": "cali" + draw(st.sampled_from("abc")),
        "ipv4_nets": [f"{ip}/32" for ip in ips if ":" not in ip] or None,
        "ipv6_nets": [f"{ip}/128" for ip in ips if ":" in ip] or None,
        "profile_ids": draw(st.lists(st.sampled_from(PROFILES), max_size=2, unique=True)) or None,
        "labels": draw(labels),
    }
    if ports := draw(st.lists(named_port, max_size=2)):
        out["ports"] = ports
    return out


@st.composite
def hep_value(draw: st.DrawFn) -> dict[str, Any]:
    ips = draw(st.lists(st.sampled_from(IPS[:3]), max_size=2, unique=True))
    out: dict[str, Any] = {"name": "eth0", "labels": draw(labels)}
    if ips:
        out["expected_ipv4_addrs"] = ips
    if profiles := draw(st.lists(st.sampled_from(PROFILES), max_size=1)):
        out["profile_ids"] = profiles
    if ports := draw(st.lists(named_port, max_size=1)):
        out["ports"] = ports
    return out


def value_for(key: Any) -> st.SearchStrategy[Any]:
    if isinstance(key, WorkloadEndpointKey):
        return wep_value()
    if isinstance(key, HostEndpointKey):
        return hep_value()
    if isinstance(key, PolicyKey):
        return policy_value(key)
    if isinstance(key, ProfileRulesKey):
        return st.fixed_dictionaries({"inbound_rules": rules, "outbound_rules": rules})
    if isinstance(key, ProfileLabelsKey):
        return st.dictionaries(
            st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), min_size=1, max_size=2
        )
    if isinstance(key, TierKey):
        return st.fixed_dictionaries(
            {"defaultAction": st.sampled_from(("Deny", "Pass"))},
            optional={"order": st.sampled_from((1, 2, 100))},
        )
    assert isinstance(key, NetworkSetKey)
    return st.fixed_dictionaries(
        {
            "nets": st.lists(st.sampled_from(NETS), min_size=1, max_size=2),
            "labels": labels,
        }
    )


ALL_KEYS: tuple[Any, ...] = (
    *WEP_KEYS,
    *HEP_KEYS,
    *POLICY_KEYS,
    *NETSET_KEYS,
    *(ProfileRulesKey(p) for p in PROFILES),
    *(ProfileLabelsKey(p) for p in PROFILES),
    *(TierKey(t) for t in TIERS),
)


@st.composite
def operation(draw: st.DrawFn) -> tuple[str, Any, Any]:
    kind = draw(st.sampled_from(("set",) * 8 + ("delete",) * 2 + ("flush", "in_sync")))
    if kind in ("flush", "in_sync"):
        return (kind, None, None)
    key = draw(st.sampled_from(ALL_KEYS))
    return (kind, key, draw(value_for(key)) if kind == "set" else None)


@st.composite
def scenario(draw: st.DrawFn, max_mutations: int = 30) -> list[tuple[str, Any, Any]]:
    """Populate most of the universe (in random order), then mutate it at random."""
    keys = draw(st.lists(st.sampled_from(ALL_KEYS), unique=True, min_size=8))
    ops: list[tuple[str, Any, Any]] = [("set", k, draw(value_for(k))) for k in keys]
    ops += draw(st.lists(operation(), max_size=max_mutations))
    return ops


class Recorder:
    """The sink: checks every batch against the dataplane state as it arrives."""

    def __init__(self) -> None:
        self.state = DataplaneState()
        self.status_in_sync = False
        self.messages: list[Any] = []

    def __call__(self, batch: list[Any]) -> None:
        if any(isinstance(msg, PolicyPrepare) for msg in batch):
            assert all(isinstance(msg, PolicyPrepare) for msg in batch), batch  # a batch alone
            assert self.state.in_sync, "PolicyPrepare before InSync"
        for msg in batch:
            if isinstance(msg, ENDPOINT_MESSAGES):
                assert self.status_in_sync, f"endpoint message before InSync: {msg}"
            if isinstance(msg, PolicyPrepare):
                assert msg.id not in self.state.policies, f"{msg.id} is active"
            self.state.apply(msg)
            self.messages.append(msg)


def run(
    ops: list[tuple[str, Any, Any]], index: str, prepare_at: dict[int, int] | None = None
) -> tuple[Recorder, dict[Any, Any]]:
    """The ops through a synchronous pipeline; ``prepare_at``: after op i, ask it to prepare
    that many inactive policies (each checked against a parse of the policy's value then)."""
    rec = Recorder()
    pipeline = build_felix_calc_pipeline(HOST, rec, index=index, synchronous=True)
    snapshot: dict[Any, Any] = {}
    pipeline.on_status_updated(SyncStatus.RESYNC_IN_PROGRESS)
    for i, (kind, key, value) in enumerate([*ops, ("in_sync", None, None)]):
        if prepare_at and i in prepare_at:
            before = len(rec.messages)
            assert pipeline.prepare(prepare_at[i]) == len(rec.messages) - before
            for msg in rec.messages[before:]:
                pkey = PolicyKey(msg.id.kind, msg.id.namespace, msg.id.name)
                assert msg.policy == parse_policy(pkey, snapshot[pkey])[0]
        if kind == "flush":
            pipeline.flush()
        elif kind == "in_sync":
            if not rec.status_in_sync:
                rec.status_in_sync = True
                pipeline.on_status_updated(SyncStatus.IN_SYNC)
        else:
            new = decode_value(key, value) if kind == "set" else None
            snapshot[key] = new
            utype = UpdateType.DELETED if new is None else UpdateType.UPDATED
            pipeline.on_updates([Update(key, new, "1", utype)])
    pipeline.flush()
    return rec, snapshot


@pytest.mark.parametrize("index", ["indexed", "linear"])
@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(ops=scenario())
def test_stream_converges_on_oracle(index: str, ops: list[tuple[str, Any, Any]]) -> None:
    rec, snapshot = run(ops, index)
    assert rec.state.in_sync
    want = desired_state(snapshot, HOST).comparable()
    got = rec.state.comparable()
    for part in want:
        assert got[part] == want[part], part


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=scenario(max_mutations=20))
def test_indexed_and_linear_emit_the_same_final_state(ops: list[tuple[str, Any, Any]]) -> None:
    indexed, _ = run(ops, "indexed")
    linear, _ = run(ops, "linear")
    assert indexed.state.comparable() == linear.state.comparable()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=scenario(max_mutations=20),
    synced_at=st.integers(0, 40),
    prepare_at=st.dictionaries(st.integers(0, 35), st.integers(1, 4), max_size=12),
)
def test_preparing_inactive_policies_changes_no_other_message(
    ops: list[tuple[str, Any, Any]], synced_at: int, prepare_at: dict[int, int]
) -> None:
    """Preparation (design/felix-calc.md "Preparing inactive policies") sends only
    ``PolicyPrepare`` batches, after InSync, for policies not active then, each its value's
    parse (checked in ``run``/``Recorder``); every other message is the same, in the same
    order, as without it. In sync part way, so the later mutations meet prepared policies."""
    ops = [*ops[:synced_at], ("in_sync", None, None), ("flush", None, None), *ops[synced_at:]]
    plain, _ = run(ops, "indexed")
    prepared, _ = run(ops, "indexed", prepare_at)
    others = [m for m in prepared.messages if not isinstance(m, PolicyPrepare)]
    assert others == plain.messages
