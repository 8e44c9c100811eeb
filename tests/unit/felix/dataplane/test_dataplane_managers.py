"""Managers against a recording table: IP sets (families, overlap), policies/profiles,
endpoints (chains, dispatch maps, routes), NAT-outgoing pools."""

from __future__ import annotations

import dataclasses
import ipaddress
from typing import Any

from dataplane_fakes import FakeRouteTable, FakeTable
from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.dataplane.managers import policy as policy_manager
from calico.felix.dataplane.managers.endpoints import EndpointManager
from calico.felix.dataplane.managers.iface_config import WorkloadIfaceConfigurator
from calico.felix.dataplane.managers.ipsets import IPSetsManager
from calico.felix.dataplane.managers.masq import MasqManager
from calico.felix.dataplane.managers.overlap import OverlapSuppressor
from calico.felix.dataplane.managers.policy import PolicyManager
from calico.felix.messages import (
    ActivePolicyRemove,
    ActivePolicyUpdate,
    ActiveProfileUpdate,
    IPAMPool,
    IPAMPoolRemove,
    IPAMPoolUpdate,
    IPSetDeltaUpdate,
    IPSetRemove,
    IPSetType,
    IPSetUpdate,
    Policy,
    PolicyID,
    Profile,
    ProfileID,
    Rule,
    TierInfo,
    WorkloadEndpoint,
    WorkloadEndpointID,
    WorkloadEndpointRemove,
    WorkloadEndpointUpdate,
)
from calico.felix.rules import RuleRenderer

N = ipaddress.ip_network


def test_overlap_suppressor_hides_covered_members_and_restores_them() -> None:
    s = OverlapSuppressor()
    assert s.add(N("10.0.0.1/32")) == ([N("10.0.0.1/32")], [])
    assert s.add(N("10.0.0.0/24")) == ([N("10.0.0.0/24")], [N("10.0.0.1/32")])
    assert s.add(N("10.0.0.2/32")) == ([], [])  # covered: not programmed
    assert s.add(N("10.0.0.0/8")) == ([N("10.0.0.0/8")], [N("10.0.0.0/24")])
    added, removed = s.remove(N("10.0.0.0/8"))
    assert removed == [N("10.0.0.0/8")] and added == [N("10.0.0.0/24")]
    added, removed = s.remove(N("10.0.0.0/24"))
    assert removed == [N("10.0.0.0/24")]
    assert sorted(added) == [N("10.0.0.1/32"), N("10.0.0.2/32")]
    assert s.remove(N("10.0.0.2/32")) == ([], [N("10.0.0.2/32")])
    assert s.remove(N("192.0.2.0/24")) == ([], [])


def test_ipsets_exist_in_both_families_without_overlaps() -> None:
    table = FakeTable()
    mgr = IPSetsManager(table)  # type: ignore[arg-type]
    mgr.on_update(IPSetUpdate("s:abc", ("10.0.0.0/8", "10.1.2.3/32", "fd00::1/128"), IPSetType.NET))
    v4, v6 = table.sets["cali40s:abc"], table.sets["cali60s:abc"]
    assert v4.interval and v4.elements == {"10.0.0.0/8"}
    assert v6.elements == {"fd00::1"}
    mgr.on_update(IPSetDeltaUpdate("s:abc", removed_members=("10.0.0.0/8",)))
    assert v4.elements == {"10.1.2.3"}
    mgr.on_update(IPSetUpdate("s:empty", (), IPSetType.NET))
    assert {"cali40s:empty", "cali60s:empty"} <= set(table.sets)
    assert mgr.num_sets == 4
    mgr.on_update(IPSetRemove("s:abc"))
    assert "cali40s:abc" not in table.sets and "cali60s:abc" not in table.sets


def test_named_port_sets_use_concatenated_members() -> None:
    table = FakeTable()
    mgr = IPSetsManager(table, (4,))  # type: ignore[arg-type]
    mgr.on_update(IPSetUpdate("n:x", ("10.0.0.1,tcp:8080",), IPSetType.IP_AND_PORT))
    s = table.sets["cali40n:x"]
    assert s.type == ("ipv4_addr", "inet_proto", "inet_service")
    assert s.elements == {("10.0.0.1", "tcp", 8080)}


def _renderer() -> RuleRenderer:
    return RuleRenderer()


def test_policy_chains_follow_updates_and_removal() -> None:
    table = FakeTable()
    mgr = PolicyManager(table, _renderer())  # type: ignore[arg-type]
    pid = PolicyID("p1", "NetworkPolicy", "ns1", "default")
    mgr.on_update(ActivePolicyUpdate(pid, Policy(inbound_rules=(Rule(action="allow"),))))
    names = {n for n in table.chains if "p1" in n}
    assert len(names) == 2 and mgr.num_policies == 1
    mgr.on_update(ActivePolicyRemove(pid))
    assert not any("p1" in n for n in table.chains)


def test_reactivated_policy_reuses_its_rendered_chains(monkeypatch: Any) -> None:
    renderer = _renderer()
    calls: list[PolicyID] = []
    real = renderer.policy_chains
    monkeypatch.setattr(
        renderer, "policy_chains", lambda pid, pol: calls.append(pid) or real(pid, pol)
    )
    table = FakeTable()
    mgr = PolicyManager(table, renderer)  # type: ignore[arg-type]
    pid = PolicyID("p1", "NetworkPolicy", "ns1", "default")
    rules = (Rule(action="allow", protocol="tcp", rule_id="r1"),)
    mgr.on_update(ActivePolicyUpdate(pid, Policy(inbound_rules=rules)))
    first = dict(table.chains)
    mgr.on_update(ActivePolicyRemove(pid))
    mgr.on_update(ActivePolicyUpdate(pid, Policy(inbound_rules=rules)))  # equal, not the same
    assert calls == [pid]
    assert all(table.chains[n] is c for n, c in first.items())
    # a rule change, a tier move (the ID carries the tier) and a config change render again
    changed = Policy(inbound_rules=(Rule(action="deny", rule_id="r2"),))
    mgr.on_update(ActivePolicyUpdate(pid, changed))
    assert calls == [pid, pid] and table.chains != first
    moved = PolicyID("p1", "NetworkPolicy", "ns1", "t1")
    mgr.on_update(ActivePolicyUpdate(moved, changed))
    assert calls[-1] == moved
    renderer.config = dataclasses.replace(renderer.config, log_prefix="other")
    mgr.on_update(ActivePolicyUpdate(pid, changed))
    assert len(calls) == 4


_pids = [PolicyID("p1", "NetworkPolicy", "ns1", "default"), PolicyID("p2", "GlobalNetworkPolicy")]
_pols = [
    Policy(inbound_rules=(Rule(action="allow", protocol="tcp", rule_id="a"),)),
    Policy(inbound_rules=(Rule(action="deny", rule_id="b"),), tier="t2"),
    Policy(outbound_rules=(Rule(action="log", rule_id="c"),), untracked=True),
    Policy(inbound_rules=(Rule(action="allow", protocol="tcp", rule_id="a"),)),
]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(_pids), st.none() | st.sampled_from(_pols)), max_size=12),
    st.sampled_from([1, 1024]),
)
def test_cached_policy_chains_equal_uncached(ops: list[Any], size: int) -> None:
    """Differential: the same updates and removals (None) give equal chains in the table with
    the render cache (evicting at ``size``) and without it."""
    tables = []
    for cache in (size, 0):
        old = policy_manager.RENDERED_POLICY_CACHE
        policy_manager.RENDERED_POLICY_CACHE = cache
        try:
            table = FakeTable()
            mgr = PolicyManager(table, _renderer())  # type: ignore[arg-type]
            for pid, pol in ops:
                msg = ActivePolicyRemove(pid) if pol is None else ActivePolicyUpdate(pid, pol)
                mgr.on_update(msg)
        finally:
            policy_manager.RENDERED_POLICY_CACHE = old
        tables.append(table.chains)
    assert tables[0] == tables[1]


def test_missing_profile_gets_empty_chains_until_it_exists() -> None:
    table = FakeTable()
    mgr = PolicyManager(table, _renderer())  # type: ignore[arg-type]
    mgr.set_profile_refs("ep1", ["kns.missing"])
    mgr.complete_deferred_work()
    stubs = [c for n, c in table.chains.items() if "kns.missing" in n]
    assert len(stubs) == 2 and all(not c.rules for c in stubs)
    mgr.on_update(ActiveProfileUpdate(ProfileID("kns.missing"), Profile((Rule("allow"),))))
    assert any(c.rules for n, c in table.chains.items() if "kns.missing" in n)
    mgr.on_update(ActiveProfileUpdate(ProfileID("kns.other"), Profile()))
    mgr.set_profile_refs("ep1", [])
    mgr.complete_deferred_work()
    assert any("kns.missing" in n for n in table.chains)  # still active in the datastore


def _wep(name: str = "cali1", **kw: object) -> WorkloadEndpoint:
    tiers = (TierInfo("default", ingress_policies=(PolicyID("p1", "NetworkPolicy", "ns1"),)),)
    defaults: dict[str, object] = {
        "state": "active",
        "name": name,
        "mac": "aa:bb:cc:dd:ee:ff",
        "profile_ids": ("kns.ns1",),
        "ipv4_nets": ("10.65.0.1/32",),
        "tiers": tiers,
    }
    defaults.update(kw)
    return WorkloadEndpoint(**defaults)  # type: ignore[arg-type]


def test_endpoint_chains_maps_routes_and_status() -> None:
    table, routes = FakeTable(), FakeRouteTable()
    renderer = _renderer()
    policies = PolicyManager(table, renderer)  # type: ignore[arg-type]
    ifaces = WorkloadIfaceConfigurator(writer=lambda *a, **k: [])
    mgr = EndpointManager(table, renderer, policies, routes, ifaces)  # type: ignore[arg-type]
    wid = WorkloadEndpointID("k8s", "ns1/pod", "eth0")
    mgr.complete_deferred_work()
    assert table.maps["filter-cali-to-wl-dispatch"].elements == {}
    mgr.on_update(WorkloadEndpointUpdate(wid, _wep()))
    mgr.complete_deferred_work()
    policies.complete_deferred_work()  # after endpoints: it creates stubs for their refs
    assert {"filter-cali-tw-cali1", "filter-cali-fw-cali1"} <= set(table.chains)
    assert table.maps["filter-cali-to-wl-dispatch"].elements == {
        "cali1": ("goto", "filter-cali-tw-cali1")
    }
    assert [t.cidr for t in routes.routes["cali1"]] == ["10.65.0.1/32"]
    assert routes.routes["cali1"][0].dest_mac == "aa:bb:cc:dd:ee:ff"
    assert any("kns.ns1" in n for n in table.chains)  # profile stub for the reference
    assert mgr.wep_status(wid) == "down"  # interface not up yet
    mgr.on_iface_state("cali1", "up", 7)
    assert ifaces.apply() and mgr.wep_status(wid) == "up"
    # Renamed interface: old chains, map entries and routes go.
    mgr.on_update(WorkloadEndpointUpdate(wid, _wep("cali2")))
    mgr.complete_deferred_work()
    assert "filter-cali-tw-cali1" not in table.chains and "cali1" not in routes.routes
    assert set(table.maps["filter-cali-from-wl-dispatch"].elements) == {"cali2"}
    mgr.on_update(WorkloadEndpointRemove(wid))
    mgr.complete_deferred_work()
    assert not any(n.endswith("cali2") for n in table.chains)
    assert "cali2" not in routes.routes and mgr.wep_status(wid) == ""


def test_failing_sysctls_keep_the_endpoint_down_and_pending() -> None:
    calls: list[str] = []

    def writer(iface: str, **kw: object) -> list[str]:
        calls.append(iface)
        return ["boom"] if len(calls) == 1 else []

    ifaces = WorkloadIfaceConfigurator(writer=writer)  # type: ignore[arg-type]
    ifaces.want("cali1", ipv4=True, ipv6=False)
    ifaces.on_iface_state("cali1", "up")
    assert not ifaces.apply() and ifaces.failing("cali1")
    assert ifaces.apply() and not ifaces.failing("cali1")
    assert calls == ["cali1", "cali1"]


def test_masq_sets_follow_pools() -> None:
    table = FakeTable()
    mgr = MasqManager(table)  # type: ignore[arg-type]
    mgr.complete_deferred_work()
    assert table.sets["cali40masq-ipam-pools"].elements == set()
    mgr.on_update(IPAMPoolUpdate("10.65.0.0-16", IPAMPool("10.65.0.0/16", masquerade=True)))
    mgr.on_update(IPAMPoolUpdate("10.64.0.0-16", IPAMPool("10.64.0.0/16")))
    mgr.complete_deferred_work()
    assert table.sets["cali40masq-ipam-pools"].elements == {"10.65.0.0/16"}
    assert table.sets["cali40all-ipam-pools"].elements == {"10.64.0.0/15"}  # collapsed
    mgr.on_update(IPAMPoolRemove("10.65.0.0-16"))
    mgr.complete_deferred_work()
    assert table.sets["cali40masq-ipam-pools"].elements == set()
