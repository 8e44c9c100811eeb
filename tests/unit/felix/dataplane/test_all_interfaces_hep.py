"""The endpoint manager and the all-interfaces (``*``) host endpoint: rendered beside named
endpoints (which the dispatch maps look up first), lowest ID wins, removal cleans up, untracked
policy ignored with one warning, left to BPF when told (design/felix-rules.md "The
all-interfaces host endpoint")."""

from __future__ import annotations

import logging

import pytest
from dataplane_fakes import FakeTable

from calico.felix.dataplane.managers.endpoints import EndpointManager
from calico.felix.dataplane.managers.policy import PolicyManager
from calico.felix.messages import (
    HostEndpoint,
    HostEndpointID,
    HostEndpointRemove,
    HostEndpointUpdate,
    PolicyID,
    TierInfo,
    WorkloadEndpoint,
    WorkloadEndpointID,
    WorkloadEndpointUpdate,
)
from calico.felix.nftables.model import Chain
from calico.felix.rules import RenderConfig, RuleRenderer

ANY = "any-interface-at-all"
UNT = PolicyID("unt", "GlobalNetworkPolicy")
HOST_DISPATCH = (
    "filter-cali-from-host-endpoint",
    "filter-cali-to-host-endpoint",
    "filter-cali-from-hep-forward",
    "filter-cali-to-hep-forward",
)


def body(chain: Chain) -> list[list[dict]]:
    return [list(r.exprs) for r in chain.rules]


def goto(target: str) -> list[dict]:
    return [{"goto": {"target": target}}]


def wild(**kw: object) -> HostEndpoint:
    return HostEndpoint("*", **kw)  # type: ignore[arg-type]


def _manager() -> tuple[FakeTable, EndpointManager]:
    table = FakeTable()
    renderer = RuleRenderer(RenderConfig(ipv6_enabled=False))
    for chain in renderer.static_chains():
        table.set_chain(chain)
    policies = PolicyManager(table, renderer)  # type: ignore[arg-type]
    return table, EndpointManager(table, renderer, policies, None)  # type: ignore[arg-type]


def test_manager_renders_the_all_interfaces_endpoint_beside_named_ones() -> None:
    table, mgr = _manager()
    mgr.on_update(HostEndpointUpdate(HostEndpointID("all"), wild()))
    mgr.on_update(HostEndpointUpdate(HostEndpointID("eth0"), HostEndpoint("eth0", ("allow",))))
    wid = WorkloadEndpointID("k8s", "ns/pod", "eth0")
    mgr.on_update(WorkloadEndpointUpdate(wid, WorkloadEndpoint("active", "cali1")))
    mgr.complete_deferred_work()
    fh = table.chains["filter-cali-from-host-endpoint"]
    assert body(fh)[-1] == goto(f"filter-cali-fh-{ANY}")
    assert f"filter-cali-fh-{ANY}" in table.chains and "filter-cali-fh-eth0" in table.chains
    # The named endpoint's interface is a map element, so it is looked up before the fallback;
    # workload interfaces are in the workload maps only.
    elements = table.maps["filter-cali-from-host-endpoint"].elements
    assert elements == {"eth0": ("goto", "filter-cali-fh-eth0")}
    assert "cali1" not in table.maps["filter-cali-to-hep-forward"].elements
    # The `*` endpoint goes: its chains and the fallback go with it.
    mgr.on_update(HostEndpointRemove(HostEndpointID("all")))
    mgr.complete_deferred_work()
    assert not any(ANY in n for n in table.chains)
    for name in HOST_DISPATCH:
        assert len(table.chains[name].rules) == 1
    assert "filter-cali-fh-eth0" in table.chains


def test_manager_lowest_id_wins_and_follows_a_replacement() -> None:
    table, mgr = _manager()
    mgr.on_update(HostEndpointUpdate(HostEndpointID("b"), wild(profile_ids=("pb",))))
    mgr.complete_deferred_work()
    assert {"jump": {"target": "filter-cali-pri-pb"}} in _flat(table, f"filter-cali-fh-{ANY}")
    mgr.on_update(HostEndpointUpdate(HostEndpointID("a"), wild(profile_ids=("pa",))))
    mgr.complete_deferred_work()
    assert {"jump": {"target": "filter-cali-pri-pa"}} in _flat(table, f"filter-cali-fh-{ANY}")
    assert {"jump": {"target": "filter-cali-pri-pb"}} not in _flat(table, f"filter-cali-fh-{ANY}")


def _flat(table: FakeTable, name: str) -> list[dict]:
    return [e for r in table.chains[name].rules for e in r.exprs]


def test_manager_warns_once_about_untracked_policy_on_all_interfaces(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table, mgr = _manager()
    hep = wild(untracked_tiers=(TierInfo("default", (UNT,)),))
    with caplog.at_level(logging.WARNING):
        mgr.on_update(HostEndpointUpdate(HostEndpointID("all"), hep))
        mgr.complete_deferred_work()
        mgr.on_update(HostEndpointUpdate(HostEndpointID("eth0"), HostEndpoint("eth0")))
        mgr.complete_deferred_work()
    warnings = [r for r in caplog.records if "DoNotTrack" in r.getMessage()]
    assert len(warnings) == 1
    assert not any(n.startswith("raw-") and ANY in n for n in table.chains)
    assert len(table.chains["raw-cali-from-host-endpoint"].rules) == 1


def test_manager_leaves_the_all_interfaces_endpoint_to_bpf_when_told() -> None:
    table, mgr = _manager()
    mgr.render_all_interfaces = False
    mgr.on_update(HostEndpointUpdate(HostEndpointID("all"), wild()))
    mgr.complete_deferred_work()
    assert not any(ANY in n for n in table.chains)
    for name in HOST_DISPATCH:
        assert len(table.chains[name].rules) == 1
