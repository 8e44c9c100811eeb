"""Preparing inactive policies in the dataplane (design/felix-calc.md "Preparing inactive
policies"): ``PolicyPrepare`` programs nothing, rendering waits for the loop's idle point, and
an activation afterwards programs exactly what it would have without any preparation.

The table is the real ``NftablesTable`` with netlink encoding; only the kernel is replaced (a
libnftables handle with an empty listing and a sender that keeps each encoded batch)."""

from __future__ import annotations

from typing import Any

from dataplane_fakes import FakeRouteTable
from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.calc.rule_scanner import parse_policy, policy_id
from calico.felix.dataplane.loop import DataplaneParts, InternalDataplane
from calico.felix.dataplane.managers import policy as policy_manager
from calico.felix.dataplane.managers.endpoints import EndpointManager
from calico.felix.dataplane.managers.ipsets import IPSetsManager
from calico.felix.dataplane.managers.policy import PolicyManager
from calico.felix.messages import (
    ActivePolicyRemove,
    ActivePolicyUpdate,
    InSync,
    PolicyID,
    PolicyPrepare,
)
from calico.felix.nftables import nlrules
from calico.felix.nftables import table as table_module
from calico.felix.nftables.model import Chain, NftRule
from calico.felix.nftables.table import NftablesTable
from calico.felix.rules import RuleRenderer
from calico.felix.throttle import TokenBucket
from calico.model import PolicyKey
from calico.model import values as v1


class _Nft:
    def json_cmd(self, root: dict[str, Any]) -> tuple[int, Any, str]:
        return 0, {"nftables": []}, ""


class _Sender:
    """Keeps each batch as NetlinkElements would send it (its bytes, sequence from 1)."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, batch: Any) -> str | None:
        self.sent.append(batch.encode(1))
        return None


def _table() -> tuple[NftablesTable, _Sender]:
    sender = _Sender()
    table = NftablesTable(nft=_Nft(), netlink=sender)  # type: ignore[arg-type]
    table.apply()  # the first readback: an empty kernel
    return table, sender


def _policy(name: str, port: int, src: str = "role == 'a'") -> tuple[PolicyID, Any]:
    key = PolicyKey("NetworkPolicy", "ns", name)
    rule = {"action": "allow", "protocol": "tcp", "src_selector": src, "dst_ports": [port]}
    value = v1.Policy.from_json({"selector": "all()", "inbound_rules": [rule]})
    return policy_id(key), parse_policy(key, value)[0]


P1, POL1 = _policy("p1", 80)
P2, POL2 = _policy("p2", 81)


def test_a_prepared_policy_programs_nothing_until_it_is_active() -> None:
    table, sender = _table()
    mgr = PolicyManager(table, RuleRenderer())
    mgr.on_update(PolicyPrepare(P1, POL1))
    assert mgr.preparing and mgr.num_policies == 0
    mgr.prepare_next()
    assert not mgr.preparing
    assert table.rendered_chain("filter-cali-pi-np/ns/p1") is None  # nothing desired
    assert table.apply().commands == 0 and sender.sent == []

    mgr.on_update(ActivePolicyUpdate(P1, POL1))
    assert table.apply().netlink and len(sender.sent) == 1
    reference, ref_sender = _table()
    PolicyManager(reference, RuleRenderer()).on_update(ActivePolicyUpdate(P1, POL1))
    reference.apply()
    assert sender.sent == ref_sender.sent  # byte for byte what no preparation sends


def test_the_activation_reuses_the_prepared_chains_and_their_rendering() -> None:
    table, _ = _table()
    mgr = PolicyManager(table, RuleRenderer())
    mgr.on_update(PolicyPrepare(P1, POL1))
    mgr.prepare_next()
    prepared = {name: entry[2] for name, entry in table._prepared.items()}
    assert sorted(prepared) == ["filter-cali-pi-np/ns/p1", "filter-cali-po-np/ns/p1"]
    for rendered in prepared.values():  # the encoder has each rule's statements already
        for exprs, _ in rendered.rules:
            assert tuple(map(id, exprs)) in nlrules._EXPRS_MEMO
    mgr.on_update(ActivePolicyUpdate(P1, POL1))
    for name, rendered in prepared.items():
        assert table.rendered_chain(name) is rendered  # set_chain used prepare_chain's work
    assert table._prepared == {}


def test_prepare_is_skipped_for_active_cached_or_no_room(monkeypatch: Any) -> None:
    table, _ = _table()
    mgr = PolicyManager(table, RuleRenderer())
    calls: list[str] = []
    real = table.prepare_chain
    monkeypatch.setattr(table, "prepare_chain", lambda c: (calls.append(c.name), real(c)))
    mgr.on_update(ActivePolicyUpdate(P1, POL1))
    mgr.on_update(PolicyPrepare(P1, POL1))  # active: not even queued
    assert not mgr.preparing
    mgr.on_update(PolicyPrepare(P2, POL2))
    mgr.on_update(ActivePolicyUpdate(P2, POL2))  # activated before its turn: dropped
    assert not mgr.preparing
    mgr.on_update(ActivePolicyRemove(P2))
    mgr.on_update(PolicyPrepare(P2, POL2))  # rendered while it was active: cached
    mgr.prepare_next()
    assert calls == []

    monkeypatch.setattr(policy_manager, "RENDERED_POLICY_CACHE", 2)
    p3, pol3 = _policy("p3", 83)
    mgr.on_update(PolicyPrepare(p3, pol3))
    mgr.prepare_next()  # the cache holds p1 and p2: a guess evicts neither
    assert calls == [] and set(mgr._rendered) == {P1, P2}

    monkeypatch.setattr(policy_manager, "RENDERED_POLICY_CACHE", 3)
    mgr.on_update(PolicyPrepare(p3, pol3))
    mgr.prepare_next()
    assert calls == ["filter-cali-pi-np/ns/p3", "filter-cali-po-np/ns/p3"]
    assert next(iter(mgr._rendered)) == p3  # behind every entry: the first to be dropped


def test_a_changed_chain_is_rendered_again() -> None:
    """prepare_chain's work is used only for the same Chain object with the same rules."""
    table, _ = _table()
    accept = {"accept": None}
    chain = Chain("filter-x", [NftRule([accept], "one")])
    table.prepare_chain(chain)
    kept = table._prepared["filter-x"][2]
    chain.rules.append(NftRule([accept], "two"))  # changed in place after preparing
    table.set_chain(chain)
    rendered = table.rendered_chain("filter-x")
    assert rendered is not kept and len(rendered.rules) == 2

    other = Chain("filter-y", [NftRule([accept], "one")])
    table.prepare_chain(other)
    table.set_chain(Chain("filter-y", list(other.rules)))  # an equal chain, another object
    assert table.rendered_chain("filter-y") is not table._prepared.get("filter-y", (0, 0, 0))[2]
    assert "filter-y" not in table._prepared


def test_prepared_chains_are_bounded(monkeypatch: Any) -> None:
    monkeypatch.setattr(table_module, "PREPARED_CHAINS", 2)
    table, _ = _table()
    for name in ("filter-a", "filter-b", "filter-c"):
        table.prepare_chain(Chain(name, [NftRule([{"accept": None}], name)]))
    assert list(table._prepared) == ["filter-b", "filter-c"]  # the oldest dropped


def test_a_chain_netlink_cannot_encode_is_prepared_without_error() -> None:
    table, _ = _table()
    inline = {"match": {"op": "==", "left": {"meta": {"key": "l4proto"}},
                        "right": {"set": ["tcp", "udp"]}}}  # fmt: skip
    table.prepare_chain(Chain("filter-z", [NftRule([inline, {"accept": None}], "z")]))
    assert "filter-z" in table._prepared


def _loop(on_idle: Any) -> tuple[InternalDataplane, PolicyManager, NftablesTable]:
    table, _ = _table()
    renderer = RuleRenderer()
    ipsets = IPSetsManager(table)
    policies = PolicyManager(table, renderer)
    endpoints = EndpointManager(table, renderer, policies, FakeRouteTable())  # type: ignore[arg-type]
    parts = DataplaneParts(
        table=table,
        ipsets=ipsets,
        policies=policies,
        endpoints=endpoints,
        managers=[ipsets, endpoints, policies],
        route_table=FakeRouteTable(),
        iface_listeners=[endpoints],
    )
    clock = iter(range(1000, 100000)).__next__
    dp = InternalDataplane(
        parts,
        clock=lambda: float(clock()),
        throttle=TokenBucket(0.001, 100, clock=lambda: 0.0),
        wait_for_ifaces=False,
        on_idle=on_idle,
    )
    return dp, policies, table


def test_the_loop_prepares_at_its_idle_point_and_applies_nothing_for_it() -> None:
    idle: list[bool] = []
    dp, policies, table = _loop(lambda: idle.append(policies.preparing))
    dp.on_messages([InSync()])
    assert dp.step() and idle == [False]
    dp.on_messages([PolicyPrepare(P1, POL1), PolicyPrepare(P2, POL2)])
    assert not dp.step()  # no apply for a preparation
    assert not policies.preparing and set(table._prepared) >= {"filter-cali-pi-np/ns/p1"}
    assert idle == [False, False]  # on_idle only once both were rendered

    real = policies.prepare_next

    def prepare_then_input() -> None:
        real()
        dp.on_messages([ActivePolicyUpdate(P2, POL2)])  # input arrives mid-way

    p3, pol3 = _policy("p3", 83)
    p4, pol4 = _policy("p4", 84)
    policies.prepare_next = prepare_then_input  # type: ignore[method-assign]
    dp.on_messages([PolicyPrepare(p3, pol3), PolicyPrepare(p4, pol4)])
    assert not dp.step()
    assert policies.preparing and len(idle) == 2  # stopped for the input, no on_idle
    policies.prepare_next = real  # type: ignore[method-assign]
    assert dp.step() and not policies.preparing and len(idle) == 3  # applied, then p4


_POOL = [_policy(f"q{i}", 8000 + i, src=f"role == 'r{i % 3}'") for i in range(4)]
_CHANGED = [_policy(f"q{i}", 9000 + i) for i in range(4)]  # the same IDs, other rules
_op = st.one_of(
    st.tuples(st.just("prepare"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("activate"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("deactivate"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("drain"), st.just(0), st.booleans()),
    st.tuples(st.just("apply"), st.just(0), st.booleans()),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_op, max_size=25), st.sampled_from([1, 2, 1024]))
def test_preparation_never_changes_what_is_programmed(ops: list[Any], cache: int) -> None:
    """Any interleaving of preparations (with the rendered-policy cache at ``cache``) sends
    the kernel byte for byte the batches the same activations send without any."""
    old = policy_manager.RENDERED_POLICY_CACHE
    policy_manager.RENDERED_POLICY_CACHE = cache
    try:
        runs = []
        for prepare in (True, False):
            table, sender = _table()
            mgr = PolicyManager(table, RuleRenderer())
            for kind, i, changed in [*ops, ("apply", 0, False)]:
                pid, pol = (_CHANGED if changed else _POOL)[i]
                if kind == "prepare" and prepare:
                    mgr.on_update(PolicyPrepare(pid, pol))
                elif kind == "drain" and prepare:
                    while mgr.preparing:
                        mgr.prepare_next()
                elif kind == "activate":
                    mgr.on_update(ActivePolicyUpdate(pid, pol))
                elif kind == "deactivate" and pid in mgr._policy_chains:
                    mgr.on_update(ActivePolicyRemove(pid))
                elif kind == "apply":
                    assert table.apply().ok
            runs.append(sender.sent)
        assert runs[0] == runs[1]
    finally:
        policy_manager.RENDERED_POLICY_CACHE = old
