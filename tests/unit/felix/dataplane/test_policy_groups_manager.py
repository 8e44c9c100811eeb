"""The endpoint manager's policy group chains (calico.felix.rules.groups) against a recording
table: after any sequence of endpoint and policy changes exactly the group chains some endpoint
jumps to are programmed, every jump has its target, a group already programmed is not
rewritten, and a selector change regroups endpoints whose policy lists did not change."""

from __future__ import annotations

from typing import Any

from dataplane_fakes import FakeTable
from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.dataplane.managers.endpoints import EndpointManager
from calico.felix.dataplane.managers.policy import PolicyManager
from calico.felix.messages import (
    ActivePolicyRemove,
    ActivePolicyUpdate,
    HostEndpoint,
    HostEndpointID,
    HostEndpointRemove,
    HostEndpointUpdate,
    Policy,
    PolicyID,
    TierInfo,
    WorkloadEndpoint,
    WorkloadEndpointID,
    WorkloadEndpointRemove,
    WorkloadEndpointUpdate,
)
from calico.felix.nftables.model import Chain
from calico.felix.rules import RuleRenderer
from calico.felix.rules.groups import is_group_chain

POLICIES = [PolicyID(f"p{i}", "GlobalNetworkPolicy", tier="default") for i in range(8)]


class CountingTable(FakeTable):
    def __init__(self) -> None:
        super().__init__()
        self.writes: dict[str, int] = {}

    def set_chain(self, chain: Chain) -> None:
        self.writes[chain.name] = self.writes.get(chain.name, 0) + 1
        super().set_chain(chain)


def make() -> tuple[CountingTable, PolicyManager, EndpointManager]:
    table = CountingTable()
    renderer = RuleRenderer()
    for chain in renderer.static_chains():  # failsafe chains etc., as the dataplane has them
        table.set_chain(chain)
    policies = PolicyManager(table, renderer)  # type: ignore[arg-type]
    endpoints = EndpointManager(table, renderer, policies, None)  # type: ignore[arg-type]
    return table, policies, endpoints


def activate(policies: PolicyManager, pid: PolicyID, selector: str) -> None:
    policies.on_update(ActivePolicyUpdate(pid, Policy(original_selector=selector)))


def wep(
    i: int, ids: tuple[PolicyID, ...], profiles: tuple[str, ...] = ()
) -> WorkloadEndpointUpdate:
    tiers = (TierInfo("default", ids, ids),)
    ep = WorkloadEndpoint("active", f"cali{i}", profile_ids=profiles, tiers=tiers)
    return WorkloadEndpointUpdate(WorkloadEndpointID("k8s", f"w{i}", "eth0"), ep)


def jump_targets(chain: Chain) -> list[str]:
    return [e["jump"]["target"] for r in chain.rules for e in r.exprs if "jump" in e]


def check(table: CountingTable) -> None:
    groups = {n for n in table.chains if is_group_chain(n)}
    jumped = {
        t for c in table.chains.values() if not is_group_chain(c.name) for t in jump_targets(c)
    }
    assert groups == {t for t in jumped if is_group_chain(t)}
    for chain in table.chains.values():
        for target in jump_targets(chain):
            assert target in table.chains, (chain.name, target)


def test_endpoints_share_a_group_chain_until_the_last_goes() -> None:
    table, policies, endpoints = make()
    for p in POLICIES[:4]:
        activate(policies, p, "all()")
    for i in range(3):
        endpoints.on_update(wep(i, tuple(POLICIES[:4])))
    endpoints.complete_deferred_work()
    check(table)
    groups = [n for n in table.chains if is_group_chain(n)]
    assert len(groups) == 2 and endpoints.num_group_chains == 2  # -gi- and -go-
    assert all(table.writes[n] == 1 for n in groups)
    # A fourth endpoint of the same shape reuses the programmed chains without rewriting them.
    endpoints.on_update(wep(3, tuple(POLICIES[:4])))
    endpoints.complete_deferred_work()
    assert all(table.writes[n] == 1 for n in groups)
    for i in range(3):
        endpoints.on_update(WorkloadEndpointRemove(wep(i, ()).id))
        endpoints.complete_deferred_work()
        assert set(groups) <= set(table.chains)  # endpoint 3 still jumps to them
    endpoints.on_update(WorkloadEndpointRemove(wep(3, ()).id))
    endpoints.complete_deferred_work()
    assert not any(is_group_chain(n) for n in table.chains) and endpoints.num_group_chains == 0


def test_groups_survive_batches_in_the_dataplane_manager_order() -> None:
    """Each batch ends with every manager's deferred work in the dataplane's order (endpoints,
    then policies): the keys must outlive a batch, so the second endpoint of a shape shares
    the first one's group (a reset of the keys in the policy manager's deferred work once
    left every later endpoint ungrouped)."""
    table, policies, endpoints = make()
    ids = tuple(POLICIES[:4])
    for p in ids:
        activate(policies, p, "all()")
    for i in range(3):
        # A new endpoint's profile reference makes the policy manager's deferred work run.
        endpoints.on_update(wep(i, ids, (f"kns.ns{i}",)))
        endpoints.complete_deferred_work()
        policies.complete_deferred_work()
        check(table)
        target, profile = jump_targets(table.chains[f"filter-cali-tw-cali{i}"])
        assert is_group_chain(target) and profile == f"filter-cali-pri-kns.ns{i}"
    assert endpoints.num_group_chains == 2
    assert policies.group_key(ids[0]) == ("", "all()")


def test_a_selector_change_regroups_an_endpoint_whose_list_is_unchanged() -> None:
    table, policies, endpoints = make()
    ids = tuple(POLICIES[:3])
    for p in ids:
        activate(policies, p, "all()")
    endpoints.on_update(wep(0, ids))
    endpoints.complete_deferred_work()
    (before,) = jump_targets(table.chains["filter-cali-tw-cali0"])
    assert is_group_chain(before)
    activate(policies, ids[1], "has(x)")  # breaks the run into three singletons
    endpoints.complete_deferred_work()
    check(table)
    after = jump_targets(table.chains["filter-cali-tw-cali0"])
    assert not any(is_group_chain(t) for t in after) and len(after) == 3
    assert before not in table.chains
    # An update with the same selector regroups nothing.
    activate(policies, ids[1], "has(x)")
    assert policies.take_regrouped() == set()


def test_host_endpoint_groups_are_refcounted_with_the_workloads() -> None:
    table, policies, endpoints = make()
    ids = tuple(POLICIES[:2])
    for p in ids:
        activate(policies, p, "all()")
    hep_id = HostEndpointID("eth0")
    hep = HostEndpoint(name="eth0", tiers=(TierInfo("default", ids, ids),))
    endpoints.on_update(HostEndpointUpdate(hep_id, hep))
    endpoints.on_update(wep(0, ids))
    endpoints.complete_deferred_work()
    check(table)
    shared = set(jump_targets(table.chains["filter-cali-tw-cali0"]))
    assert shared and shared <= set(jump_targets(table.chains["filter-cali-fh-eth0"]))
    endpoints.on_update(WorkloadEndpointRemove(wep(0, ()).id))
    endpoints.complete_deferred_work()
    assert shared <= set(table.chains)  # the host endpoint still jumps to them
    endpoints.on_update(HostEndpointRemove(hep_id))
    endpoints.complete_deferred_work()
    check(table)
    assert not any(is_group_chain(n) for n in table.chains)


ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("wep"),
            st.integers(0, 4),
            st.lists(st.sampled_from(POLICIES), max_size=6, unique=True),
        ),
        st.tuples(st.just("remove"), st.integers(0, 4), st.just([])),
        st.tuples(st.just("selector"), st.integers(0, len(POLICIES) - 1), st.just([])),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(ops, st.lists(st.booleans(), min_size=8, max_size=8))
def test_programmed_groups_are_exactly_the_jumped_ones(ops_: list[Any], sels: list[bool]) -> None:
    table, policies, endpoints = make()
    selectors = ["all()" if s else "has(a)" for s in sels]
    for p, sel in zip(POLICIES, selectors, strict=True):
        activate(policies, p, sel)
    for op, i, ids in ops_:
        if op == "wep":
            endpoints.on_update(wep(i, tuple(ids)))
        elif op == "remove":
            endpoints.on_update(WorkloadEndpointRemove(wep(i, ()).id))
        else:
            selectors[i] = "has(b)" if selectors[i] != "has(b)" else "all()"
            activate(policies, POLICIES[i], selectors[i])
        endpoints.complete_deferred_work()
        check(table)
    for i in range(5):
        endpoints.on_update(WorkloadEndpointRemove(wep(i, ()).id))
    endpoints.complete_deferred_work()
    assert not any(is_group_chain(n) for n in table.chains)
    # Removing a policy clears its key (it regroups nothing once no endpoint jumps to it).
    policies.on_update(ActivePolicyRemove(POLICIES[0]))
    assert policies.group_key(POLICIES[0]) is None
