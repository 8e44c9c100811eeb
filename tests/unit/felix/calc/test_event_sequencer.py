"""EventSequencer: coalescing rules, exact flush order, IP set contract, and a model-based property.

The property test drives the sequencer with random *legal* callback sequences (the contract the
calculation nodes promise), applies every emitted batch to a strict model of the dataplane that
rejects dangling references and deletes of unknown objects, and checks that after each flush the
dataplane equals the intended state.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from calico.felix.calc.callbacks import PipelineCallbacks
from calico.felix.calc.event_sequencer import EventSequencer, SequencerError
from calico.felix.messages import (
    ActivePolicyRemove,
    ActivePolicyUpdate,
    ActiveProfileRemove,
    ActiveProfileUpdate,
    ConfigUpdate,
    DatastoreNotReady,
    Encapsulation,
    GlobalBGPConfigUpdate,
    HostEndpoint,
    HostEndpointID,
    HostEndpointRemove,
    HostEndpointUpdate,
    HostMetadataRemove,
    HostMetadataUpdate,
    HostMetadataV4V6Remove,
    HostMetadataV4V6Update,
    IPAMPool,
    IPAMPoolRemove,
    IPAMPoolUpdate,
    IPSetDeltaUpdate,
    IPSetRemove,
    IPSetType,
    IPSetUpdate,
    NamespaceID,
    NamespaceRemove,
    NamespaceUpdate,
    Policy,
    PolicyID,
    Profile,
    ProfileID,
    RouteRemove,
    RouteUpdate,
    Rule,
    ServiceAccountID,
    ServiceAccountRemove,
    ServiceAccountUpdate,
    ServiceRemove,
    ServiceUpdate,
    TierInfo,
    ToDataplane,
    VXLANTunnelEndpointRemove,
    VXLANTunnelEndpointUpdate,
    WireguardEndpointRemove,
    WireguardEndpointUpdate,
    WireguardEndpointV6Remove,
    WireguardEndpointV6Update,
    WorkloadEndpoint,
    WorkloadEndpointID,
    WorkloadEndpointRemove,
    WorkloadEndpointUpdate,
)

NET = IPSetType.NET
POL = PolicyID("p1", kind="GlobalNetworkPolicy", tier="default")
PROF = ProfileID("kns.default")
WEP = WorkloadEndpointID("k8s", "default/pod", "eth0")
HEP = HostEndpointID("h-eth0")


class Recorder:
    def __init__(self) -> None:
        self.batches: list[list[ToDataplane]] = []

    def __call__(self, msgs: list[ToDataplane]) -> None:
        self.batches.append(list(msgs))

    def take(self) -> list[ToDataplane]:
        out = [m for b in self.batches for m in b]
        self.batches.clear()
        return out


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture
def seq(rec: Recorder) -> EventSequencer:
    return EventSequencer(rec)


def flushed(seq: EventSequencer, rec: Recorder) -> list[ToDataplane]:
    seq.flush()
    return rec.take()


def pol(sel: str = "a", *set_ids: str) -> Policy:
    return Policy(
        inbound_rules=(Rule(action="allow", src_ip_set_ids=set_ids),), original_selector=sel
    )


def wep(name: str = "cali1", policies: tuple[PolicyID, ...] = ()) -> WorkloadEndpoint:
    tiers = (TierInfo("default", ingress_policies=policies),) if policies else ()
    return WorkloadEndpoint(state="active", name=name, tiers=tiers)


# -- protocol ---------------------------------------------------------------------------------


def test_implements_pipeline_callbacks_exactly() -> None:
    for name, fn in inspect.getmembers(PipelineCallbacks, inspect.isfunction):
        if not name.startswith("_"):
            assert inspect.signature(getattr(EventSequencer, name)) == inspect.signature(fn), name


def test_empty_flush_does_not_call_sink(seq: EventSequencer, rec: Recorder) -> None:
    assert not seq.pending()
    assert seq.flush() == 0
    assert rec.batches == []


# -- generic coalescing -------------------------------------------------------------------------


def test_update_then_flush_then_duplicate_is_suppressed(seq: EventSequencer, rec: Recorder) -> None:
    seq.on_policy_active(POL, pol())
    assert flushed(seq, rec) == [ActivePolicyUpdate(POL, pol())]
    seq.on_policy_active(POL, pol())
    assert not seq.pending()
    assert flushed(seq, rec) == []


def test_latest_update_wins(seq: EventSequencer, rec: Recorder) -> None:
    seq.on_policy_active(POL, pol("a"))
    seq.on_policy_active(POL, pol("b"))
    assert flushed(seq, rec) == [ActivePolicyUpdate(POL, pol("b"))]


def test_delete_of_unsent_is_suppressed(seq: EventSequencer, rec: Recorder) -> None:
    seq.on_policy_inactive(POL)
    seq.on_workload_endpoint_update(WEP, None)
    seq.on_route_remove("10.0.0.0/24")
    seq.on_host_metadata_remove("h1")
    assert not seq.pending()
    assert flushed(seq, rec) == []


def test_delete_cancels_pending_update_of_unsent(seq: EventSequencer, rec: Recorder) -> None:
    seq.on_workload_endpoint_update(WEP, wep())
    seq.on_workload_endpoint_update(WEP, None)
    assert flushed(seq, rec) == []


def test_delete_cancels_pending_update_of_sent(seq: EventSequencer, rec: Recorder) -> None:
    seq.on_workload_endpoint_update(WEP, wep("a"))
    flushed(seq, rec)
    seq.on_workload_endpoint_update(WEP, wep("b"))
    seq.on_workload_endpoint_update(WEP, None)
    assert flushed(seq, rec) == [WorkloadEndpointRemove(WEP)]


def test_update_cancels_pending_delete(seq: EventSequencer, rec: Recorder) -> None:
    seq.on_profile_active(PROF, Profile())
    flushed(seq, rec)
    seq.on_profile_inactive(PROF)
    seq.on_profile_active(PROF, Profile(inbound_rules=(Rule("deny"),)))
    assert flushed(seq, rec) == [ActiveProfileUpdate(PROF, Profile(inbound_rules=(Rule("deny"),)))]


def test_delete_then_identical_readd_emits_nothing(seq: EventSequencer, rec: Recorder) -> None:
    seq.on_host_endpoint_update(HEP, HostEndpoint(name="eth0"))
    flushed(seq, rec)
    seq.on_host_endpoint_update(HEP, None)
    seq.on_host_endpoint_update(HEP, HostEndpoint(name="eth0"))
    assert flushed(seq, rec) == []


def test_within_step_output_is_sorted_by_id(seq: EventSequencer, rec: Recorder) -> None:
    for dst in ("10.0.2.0/24", "10.0.0.0/24", "10.0.1.0/24"):
        seq.on_route_update(RouteUpdate(dst=dst))
    assert [m.dst for m in flushed(seq, rec)] == ["10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24"]


# -- IP sets --------------------------------------------------------------------------------------


def test_added_set_carries_full_sorted_members_and_no_delta(
    seq: EventSequencer, rec: Recorder
) -> None:
    seq.on_ipset_added("s:x", NET)
    seq.on_ipset_member_added("s:x", "10.0.0.2/32")
    seq.on_ipset_member_added("s:x", "10.0.0.1/32")
    seq.on_ipset_member_added("s:x", "10.0.0.3/32")
    seq.on_ipset_member_removed("s:x", "10.0.0.3/32")
    seq.on_ipset_member_removed("s:x", "10.0.0.9/32")  # fresh set: nothing to remove downstream
    assert flushed(seq, rec) == [IPSetUpdate("s:x", ("10.0.0.1/32", "10.0.0.2/32"), NET)]


def test_member_add_and_remove_cancel_on_sent_set(seq: EventSequencer, rec: Recorder) -> None:
    seq.on_ipset_added("s:x", NET)
    seq.on_ipset_member_added("s:x", "10.0.0.1/32")
    flushed(seq, rec)
    seq.on_ipset_member_removed("s:x", "10.0.0.1/32")
    seq.on_ipset_member_added("s:x", "10.0.0.1/32")
    seq.on_ipset_member_added("s:x", "10.0.0.2/32")
    seq.on_ipset_member_removed("s:x", "10.0.0.2/32")
    assert not seq.pending()
    assert flushed(seq, rec) == []


def test_one_delta_per_set_with_adds_and_removes(seq: EventSequencer, rec: Recorder) -> None:
    for set_id in ("s:b", "s:a"):
        seq.on_ipset_added(set_id, NET)
        seq.on_ipset_member_added(set_id, "10.0.0.1/32")
    flushed(seq, rec)
    seq.on_ipset_member_added("s:b", "10.0.0.3/32")
    seq.on_ipset_member_added("s:b", "10.0.0.2/32")
    seq.on_ipset_member_removed("s:b", "10.0.0.1/32")
    seq.on_ipset_member_added("s:a", "10.0.0.5/32")
    assert flushed(seq, rec) == [
        IPSetDeltaUpdate("s:a", ("10.0.0.5/32",), ()),
        IPSetDeltaUpdate("s:b", ("10.0.0.2/32", "10.0.0.3/32"), ("10.0.0.1/32",)),
    ]


def test_readd_of_sent_set_discards_deltas_and_resends_in_full(
    seq: EventSequencer, rec: Recorder
) -> None:
    seq.on_ipset_added("s:x", NET)
    seq.on_ipset_member_added("s:x", "10.0.0.1/32")
    flushed(seq, rec)
    seq.on_ipset_member_added("s:x", "10.0.0.2/32")
    seq.on_ipset_removed("s:x")
    seq.on_ipset_added("s:x", NET)
    seq.on_ipset_member_added("s:x", "10.0.0.3/32")
    assert flushed(seq, rec) == [IPSetUpdate("s:x", ("10.0.0.3/32",), NET)]


def test_set_added_and_removed_before_flush_emits_nothing(
    seq: EventSequencer, rec: Recorder
) -> None:
    seq.on_ipset_added("s:x", NET)
    seq.on_ipset_member_added("s:x", "10.0.0.1/32")
    seq.on_ipset_removed("s:x")
    assert flushed(seq, rec) == []


def test_removing_sent_set_drops_its_pending_deltas(seq: EventSequencer, rec: Recorder) -> None:
    seq.on_ipset_added("s:x", NET)
    flushed(seq, rec)
    seq.on_ipset_member_added("s:x", "10.0.0.1/32")
    seq.on_ipset_removed("s:x")
    assert flushed(seq, rec) == [IPSetRemove("s:x")]
    seq.on_ipset_added("s:x", NET)  # legal again once the removal has been sent
    assert flushed(seq, rec) == [IPSetUpdate("s:x", (), NET)]


def _added(seq: EventSequencer) -> None:
    seq.on_ipset_added("s:x", NET)


def _sent(seq: EventSequencer) -> None:
    seq.on_ipset_added("s:x", NET)
    seq.flush()


def _sent_then_removed(seq: EventSequencer) -> None:
    _sent(seq)
    seq.on_ipset_removed("s:x")


@pytest.mark.parametrize(
    ("setup", "call"),
    [
        (None, lambda s: s.on_ipset_member_added("s:x", "10.0.0.1/32")),
        (None, lambda s: s.on_ipset_member_removed("s:x", "10.0.0.1/32")),
        (None, lambda s: s.on_ipset_removed("s:x")),
        (_added, lambda s: s.on_ipset_added("s:x", NET)),
        (_sent, lambda s: s.on_ipset_added("s:x", NET)),
        (_sent_then_removed, lambda s: s.on_ipset_member_added("s:x", "10.0.0.1/32")),
        (_sent_then_removed, lambda s: s.on_ipset_removed("s:x")),
    ],
    ids=[
        "member-add-unknown",
        "member-remove-unknown",
        "remove-unknown",
        "double-add-pending",
        "re-add-sent",
        "member-after-remove",
        "double-remove",
    ],
)
def test_contract_violations_raise_and_log(
    setup: Any, call: Any, caplog: pytest.LogCaptureFixture
) -> None:
    seq = EventSequencer(lambda msgs: None)
    if setup is not None:
        setup(seq)
    with caplog.at_level(logging.ERROR), pytest.raises(SequencerError):
        call(seq)
    assert isinstance(SequencerError(), AssertionError)
    assert any("BUG" in r.getMessage() for r in caplog.records)


# -- config, readiness and single-value channels ----------------------------------------------


def test_config_merge_precedence_and_change_detection(seq: EventSequencer, rec: Recorder) -> None:
    seq.on_config_update({"A": "g", "B": "g", "C": "g"}, {"B": "s", "C": "s"}, {"C": "h"})
    assert flushed(seq, rec) == [ConfigUpdate({"A": "g", "B": "s", "C": "h"})]
    seq.on_config_update({"A": "g"}, {"B": "s"}, {"C": "h", "B": "s"})  # same merged result
    assert flushed(seq, rec) == []
    seq.on_config_update({}, {}, {})
    assert flushed(seq, rec) == [ConfigUpdate({})]


def test_first_config_is_always_sent_even_if_empty(seq: EventSequencer, rec: Recorder) -> None:
    seq.on_config_update({}, {}, {})
    assert flushed(seq, rec) == [ConfigUpdate({})]


def test_datastore_not_ready_comes_first_and_once(seq: EventSequencer, rec: Recorder) -> None:
    seq.on_route_update(RouteUpdate(dst="10.0.0.0/24"))
    seq.on_config_update({"A": "1"}, {}, {})
    seq.on_datastore_not_ready()
    seq.on_datastore_not_ready()
    out = flushed(seq, rec)
    assert [type(m) for m in out] == [DatastoreNotReady, ConfigUpdate, RouteUpdate]
    assert flushed(seq, rec) == []


def test_encap_and_bgp_config_suppress_repeats(seq: EventSequencer, rec: Recorder) -> None:
    seq.on_encap_update(Encapsulation(ipip_enabled=True))
    seq.on_global_bgp_config_update(GlobalBGPConfigUpdate(("10.96.0.0/12",)))
    assert len(flushed(seq, rec)) == 2
    seq.on_encap_update(Encapsulation(ipip_enabled=True))
    seq.on_global_bgp_config_update(GlobalBGPConfigUpdate(("10.96.0.0/12",)))
    assert flushed(seq, rec) == []
    seq.on_encap_update(Encapsulation(vxlan_enabled=True))
    assert flushed(seq, rec) == [Encapsulation(vxlan_enabled=True)]


def test_wireguard_update_without_key_withdraws(seq: EventSequencer, rec: Recorder) -> None:
    seq.on_wireguard_update(WireguardEndpointUpdate("h1", ""))
    seq.on_wireguard_v6_update(WireguardEndpointV6Update("h1", ""))
    assert flushed(seq, rec) == []  # never sent: nothing to withdraw
    seq.on_wireguard_update(WireguardEndpointUpdate("h1", "k4"))
    seq.on_wireguard_v6_update(WireguardEndpointV6Update("h1", "k6"))
    assert len(flushed(seq, rec)) == 2
    seq.on_wireguard_update(WireguardEndpointUpdate("h1", ""))
    seq.on_wireguard_v6_update(WireguardEndpointV6Update("h1", ""))
    assert flushed(seq, rec) == [WireguardEndpointRemove("h1"), WireguardEndpointV6Remove("h1")]


def test_host_metadata_also_drives_v4_only_message(seq: EventSequencer, rec: Recorder) -> None:
    full = HostMetadataV4V6Update("h1", ipv4_addr="10.0.0.1/24", ipv6_addr="fd00::1/64")
    seq.on_host_metadata_update(full)
    assert flushed(seq, rec) == [HostMetadataUpdate("h1", "10.0.0.1"), full]
    v6_only = HostMetadataV4V6Update("h1", ipv6_addr="fd00::1/64")
    seq.on_host_metadata_update(v6_only)
    assert flushed(seq, rec) == [HostMetadataRemove("h1"), v6_only]
    seq.on_host_metadata_remove("h1")
    assert flushed(seq, rec) == [HostMetadataV4V6Remove("h1")]


def test_labels_are_sorted_and_services_keyed_by_namespace_and_name(
    seq: EventSequencer, rec: Recorder
) -> None:
    sa = ServiceAccountID("default", "ns1")
    seq.on_service_account_update(sa, {"b": "2", "a": "1"})
    seq.on_service_update(ServiceUpdate("svc", "ns2"))
    seq.on_service_update(ServiceUpdate("svc", "ns1"))
    assert flushed(seq, rec) == [
        ServiceAccountUpdate(sa, (("a", "1"), ("b", "2"))),
        ServiceUpdate("svc", "ns1"),
        ServiceUpdate("svc", "ns2"),
    ]
    seq.on_service_remove("svc", "ns1")
    assert flushed(seq, rec) == [ServiceRemove("svc", "ns1")]


# -- the exact flush order --------------------------------------------------------------------


def test_flush_order_with_one_event_of_every_kind(seq: EventSequencer, rec: Recorder) -> None:
    old_pol, old_prof = PolicyID("old"), ProfileID("old")
    old_wep = WorkloadEndpointID("k8s", "default/old", "eth0")
    old_hep = HostEndpointID("old")
    sa, ns = ServiceAccountID("sa", "ns"), NamespaceID("ns")
    # Phase 1: send everything that phase 2 will delete.
    seq.on_ipset_added("s:old", NET)
    seq.on_ipset_added("s:kept", NET)
    seq.on_policy_active(old_pol, pol())
    seq.on_profile_active(old_prof, Profile())
    seq.on_workload_endpoint_update(old_wep, wep())
    seq.on_host_endpoint_update(old_hep, HostEndpoint(name="eth0"))
    seq.on_service_account_update(ServiceAccountID("old", "ns"), {})
    seq.on_namespace_update(NamespaceID("old"), {})
    seq.on_route_update(RouteUpdate(dst="10.0.9.0/24"))
    seq.on_vtep_update(VXLANTunnelEndpointUpdate("old"))
    seq.on_wireguard_update(WireguardEndpointUpdate("old", "k"))
    seq.on_wireguard_v6_update(WireguardEndpointV6Update("old", "k"))
    seq.on_host_metadata_update(HostMetadataV4V6Update("old", ipv4_addr="10.0.0.9/24"))
    seq.on_ip_pool_update("10.9.0.0-16", IPAMPool("10.9.0.0/16"))
    seq.on_service_update(ServiceUpdate("old", "ns"))
    seq.flush()
    rec.take()
    # Phase 2: one event of every kind.
    seq.on_service_update(ServiceUpdate("new", "ns"))
    seq.on_service_remove("old", "ns")
    seq.on_global_bgp_config_update(GlobalBGPConfigUpdate())
    seq.on_encap_update(Encapsulation(vxlan_enabled=True))
    seq.on_ip_pool_update("10.1.0.0-16", IPAMPool("10.1.0.0/16"))
    seq.on_ip_pool_remove("10.9.0.0-16")
    seq.on_host_metadata_update(HostMetadataV4V6Update("new", ipv4_addr="10.0.0.1/24"))
    seq.on_host_metadata_remove("old")
    seq.on_wireguard_v6_update(WireguardEndpointV6Update("new", "k"))
    seq.on_wireguard_update(WireguardEndpointUpdate("new", "k"))
    seq.on_wireguard_v6_remove("old")
    seq.on_wireguard_remove("old")
    seq.on_route_update(RouteUpdate(dst="10.0.1.0/24"))
    seq.on_vtep_update(VXLANTunnelEndpointUpdate("new"))
    seq.on_vtep_remove("old")
    seq.on_route_remove("10.0.9.0/24")
    seq.on_namespace_update(ns, {})
    seq.on_namespace_remove(NamespaceID("old"))
    seq.on_service_account_update(sa, {})
    seq.on_service_account_remove(ServiceAccountID("old", "ns"))
    seq.on_ipset_removed("s:old")
    seq.on_policy_inactive(old_pol)
    seq.on_profile_inactive(old_prof)
    seq.on_host_endpoint_update(old_hep, None)
    seq.on_workload_endpoint_update(old_wep, None)
    seq.on_host_endpoint_update(HEP, HostEndpoint(name="eth1"))
    seq.on_workload_endpoint_update(WEP, wep("cali2", (POL,)))
    seq.on_profile_active(PROF, Profile())
    seq.on_policy_active(POL, pol("x", "s:new"))
    seq.on_ipset_member_added("s:kept", "10.0.0.1/32")
    seq.on_ipset_added("s:new", NET)
    seq.on_config_update({"A": "1"}, {}, {})
    seq.on_datastore_not_ready()
    assert seq.flush() == 35
    assert len(rec.batches) == 1  # one batch per flush
    assert [type(m) for m in rec.batches[0]] == [
        DatastoreNotReady,  # 1
        ConfigUpdate,  # 2
        IPSetUpdate,  # 3
        IPSetDeltaUpdate,  # 4
        ActivePolicyUpdate,  # 5
        ActiveProfileUpdate,  # 6
        WorkloadEndpointUpdate,  # 7
        HostEndpointUpdate,
        WorkloadEndpointRemove,  # 8
        HostEndpointRemove,
        ActiveProfileRemove,  # 9
        ActivePolicyRemove,  # 10
        IPSetRemove,  # 11
        ServiceAccountRemove,  # 12
        ServiceAccountUpdate,
        NamespaceRemove,  # 13
        NamespaceUpdate,
        RouteRemove,  # 14
        VXLANTunnelEndpointRemove,  # 15
        VXLANTunnelEndpointUpdate,  # 16
        RouteUpdate,  # 17
        WireguardEndpointRemove,  # 18
        WireguardEndpointV6Remove,
        WireguardEndpointUpdate,  # 19
        WireguardEndpointV6Update,
        HostMetadataRemove,  # 20
        HostMetadataV4V6Remove,
        HostMetadataUpdate,  # 21
        HostMetadataV4V6Update,
        IPAMPoolRemove,  # 22
        IPAMPoolUpdate,  # 23
        Encapsulation,  # 24
        GlobalBGPConfigUpdate,  # 25
        ServiceRemove,  # 26
        ServiceUpdate,
    ]
    assert IPAMPoolUpdate("10.1.0.0-16", IPAMPool("10.1.0.0/16")) in rec.batches[0]
    assert not seq.pending()


# -- model-based property -----------------------------------------------------------------------

SET_IDS = ("s:a", "s:b", "s:c")
MEMBERS = ("10.0.0.1/32", "10.0.0.2/32")
POLICY_IDS = (PolicyID("p1", tier="default"), PolicyID("p2", tier="default"))
PROFILE_IDS = (ProfileID("prof1"), ProfileID("prof2"))
WEP_IDS = (WorkloadEndpointID("k8s", "ns/w1", "eth0"),)
HEP_IDS = (HostEndpointID("h1"),)
HOSTS = ("node1", "node2")
VARIANTS = ("a", "b")


def _rule_set_refs(rules: tuple[Rule, ...]) -> set[str]:
    refs: set[str] = set()
    for r in rules:
        for name in Rule.__dataclass_fields__:
            if name.endswith("ip_set_ids"):
                refs.update(getattr(r, name))
    return refs


def _set_refs(obj: Policy | Profile) -> set[str]:
    return _rule_set_refs(obj.inbound_rules) | _rule_set_refs(obj.outbound_rules)


def _endpoint_refs(ep: WorkloadEndpoint | HostEndpoint) -> tuple[set[PolicyID], set[ProfileID]]:
    tiers = list(ep.tiers)
    if isinstance(ep, HostEndpoint):
        tiers += [*ep.untracked_tiers, *ep.pre_dnat_tiers, *ep.forward_tiers]
    pols = {p for t in tiers for p in (*t.ingress_policies, *t.egress_policies)}
    return pols, {ProfileID(n) for n in ep.profile_ids}


class State:
    """Either the intended state (model) or what a strict dataplane has been told."""

    def __init__(self) -> None:
        self.ipsets: dict[str, tuple[IPSetType, set[str]]] = {}
        self.policies: dict[PolicyID, Policy] = {}
        self.profiles: dict[ProfileID, Profile] = {}
        self.endpoints: dict[Any, WorkloadEndpoint | HostEndpoint] = {}
        self.routes: dict[str, RouteUpdate] = {}
        self.hosts: dict[str, HostMetadataV4V6Update] = {}
        self.host_ips: dict[str, str] = {}
        self.wireguard: dict[str, WireguardEndpointUpdate] = {}
        self.namespaces: dict[NamespaceID, NamespaceUpdate] = {}
        self.config: dict[str, str] | None = None

    def snapshot(self) -> dict[str, Any]:
        d = dict(vars(self))
        d["ipsets"] = {k: (t, frozenset(m)) for k, (t, m) in self.ipsets.items()}
        return d

    def policy_users(self) -> tuple[set[PolicyID], set[ProfileID]]:
        pols: set[PolicyID] = set()
        profs: set[ProfileID] = set()
        for ep in self.endpoints.values():
            p, q = _endpoint_refs(ep)
            pols |= p
            profs |= q
        return pols, profs

    def set_users(self) -> set[str]:
        objs = [*self.policies.values(), *self.profiles.values()]
        return set().union(*(_set_refs(o) for o in objs)) if objs else set()


def apply_to_dataplane(dp: State, msg: ToDataplane) -> None:
    """Apply one message, asserting it references only what the dataplane already has."""
    match msg:
        case IPSetUpdate():
            dp.ipsets[msg.id] = (msg.type, set(msg.members))
        case IPSetDeltaUpdate():
            members = dp.ipsets[msg.id][1]
            assert set(msg.removed_members) <= members, msg
            assert not set(msg.added_members) & members, msg
            members.difference_update(msg.removed_members)
            members.update(msg.added_members)
        case IPSetRemove():
            assert msg.id not in dp.set_users(), f"{msg} while still referenced"
            del dp.ipsets[msg.id]
        case ActivePolicyUpdate() | ActiveProfileUpdate():
            obj = msg.policy if isinstance(msg, ActivePolicyUpdate) else msg.profile
            assert _set_refs(obj) <= dp.ipsets.keys(), f"{msg} references unknown IP sets"
            store: dict[Any, Any] = (
                dp.policies if isinstance(msg, ActivePolicyUpdate) else dp.profiles
            )
            store[msg.id] = obj
        case ActivePolicyRemove():
            assert msg.id not in dp.policy_users()[0], f"{msg} while still referenced"
            del dp.policies[msg.id]
        case ActiveProfileRemove():
            assert msg.id not in dp.policy_users()[1], f"{msg} while still referenced"
            del dp.profiles[msg.id]
        case WorkloadEndpointUpdate() | HostEndpointUpdate():
            pols, profs = _endpoint_refs(msg.endpoint)
            assert pols <= dp.policies.keys() and profs <= dp.profiles.keys(), msg
            dp.endpoints[msg.id] = msg.endpoint
        case WorkloadEndpointRemove() | HostEndpointRemove():
            del dp.endpoints[msg.id]
        case RouteUpdate():
            dp.routes[msg.dst] = msg
        case RouteRemove():
            del dp.routes[msg.dst]
        case HostMetadataV4V6Update():
            dp.hosts[msg.hostname] = msg
        case HostMetadataV4V6Remove():
            del dp.hosts[msg.hostname]
        case HostMetadataUpdate():
            dp.host_ips[msg.hostname] = msg.ipv4_addr
        case HostMetadataRemove():
            del dp.host_ips[msg.hostname]
        case WireguardEndpointUpdate():
            dp.wireguard[msg.hostname] = msg
        case WireguardEndpointRemove():
            del dp.wireguard[msg.hostname]
        case NamespaceUpdate():
            dp.namespaces[msg.id] = msg
        case NamespaceRemove():
            del dp.namespaces[msg.id]
        case ConfigUpdate():
            dp.config = dict(msg.config)
        case _:
            raise AssertionError(f"unexpected message {msg!r}")


def _policy(refs: tuple[str, ...], variant: str) -> Policy:
    return Policy(
        inbound_rules=(Rule("allow", src_ip_set_ids=refs[:1]),),
        outbound_rules=(Rule("deny", not_dst_ip_set_ids=refs[1:]),),
        original_selector=variant,
    )


class SequencerMachine(RuleBasedStateMachine):
    """Legal callback sequences only; the dataplane must track the model after every flush.

    Mirrors how the real graph drives the sequencer: the "datastore" holds endpoints, policy and
    profile definitions and set memberships; policies/profiles are active while an endpoint uses
    them and IP sets while an active policy/profile references them. Each rule changes the
    datastore and reconciles, issuing removals before or after additions (both are legal), so
    cascades (endpoint gone -> policy inactive -> set removed) and re-activations land in one
    batch. Few ids on purpose: collisions are where the coalescing bugs live.
    """

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[ToDataplane]] = []
        self.seq = EventSequencer(self.batches.append)
        self.model = State()  # what the sequencer has been told (the intended dataplane state)
        self.dp = State()  # what the emitted messages built
        self.set_defs: dict[str, set[str]] = {s: set() for s in SET_IDS}
        self.policy_defs = {p: _policy((), "a") for p in POLICY_IDS}
        self.profile_defs = {p: Profile() for p in PROFILE_IDS}
        self.endpoint_defs: dict[Any, WorkloadEndpoint | HostEndpoint] = {}

    def _reconcile(self, removals_first: bool) -> None:
        if removals_first:
            self._removals()
            self._additions()
        else:
            self._additions()
            self._removals()

    def _wanted(self) -> tuple[set[PolicyID], set[ProfileID], set[str]]:
        pols: set[PolicyID] = set()
        profs: set[ProfileID] = set()
        for ep in self.endpoint_defs.values():
            p, q = _endpoint_refs(ep)
            pols |= p
            profs |= q
        sets: set[str] = set()
        for pid in pols:
            sets |= _set_refs(self.policy_defs[pid])
        for prid in profs:
            sets |= _set_refs(self.profile_defs[prid])
        return pols, profs, sets

    def _removals(self) -> None:
        m, seq = self.model, self.seq
        pols, profs, sets = self._wanted()
        for eid in [e for e in m.endpoints if e not in self.endpoint_defs]:
            del m.endpoints[eid]
            if isinstance(eid, WorkloadEndpointID):
                seq.on_workload_endpoint_update(eid, None)
            else:
                seq.on_host_endpoint_update(eid, None)
        for pid in [p for p in m.policies if p not in pols]:
            del m.policies[pid]
            seq.on_policy_inactive(pid)
        for prid in [p for p in m.profiles if p not in profs]:
            del m.profiles[prid]
            seq.on_profile_inactive(prid)
        for set_id in [s for s in m.ipsets if s not in sets]:
            del m.ipsets[set_id]
            seq.on_ipset_removed(set_id)

    def _additions(self) -> None:
        m, seq = self.model, self.seq
        pols, profs, sets = self._wanted()
        for set_id in sorted(sets - m.ipsets.keys()):
            seq.on_ipset_added(set_id, IPSetType.NET)
            for member in sorted(self.set_defs[set_id]):
                seq.on_ipset_member_added(set_id, member)
            m.ipsets[set_id] = (IPSetType.NET, set(self.set_defs[set_id]))
        for pid in sorted(pols):
            if m.policies.get(pid) != self.policy_defs[pid]:
                m.policies[pid] = self.policy_defs[pid]
                seq.on_policy_active(pid, self.policy_defs[pid])
        for prid in sorted(profs):
            if m.profiles.get(prid) != self.profile_defs[prid]:
                m.profiles[prid] = self.profile_defs[prid]
                seq.on_profile_active(prid, self.profile_defs[prid])
        for eid, ep in self.endpoint_defs.items():
            if m.endpoints.get(eid) != ep:
                m.endpoints[eid] = ep
                if isinstance(eid, WorkloadEndpointID):
                    assert isinstance(ep, WorkloadEndpoint)
                    seq.on_workload_endpoint_update(eid, ep)
                else:
                    assert isinstance(ep, HostEndpoint)
                    seq.on_host_endpoint_update(eid, ep)

    @rule(
        eid=st.sampled_from(WEP_IDS + HEP_IDS),
        pols=st.lists(st.sampled_from(POLICY_IDS), unique=True, max_size=2),
        prof=st.sampled_from((None, *PROFILE_IDS)),
        variant=st.sampled_from(VARIANTS),
        removals_first=st.booleans(),
    )
    def set_endpoint(
        self,
        eid: Any,
        pols: list[PolicyID],
        prof: ProfileID | None,
        variant: str,
        removals_first: bool,
    ) -> None:
        tiers = (
            TierInfo("default", ingress_policies=tuple(pols[:1]), egress_policies=tuple(pols[1:])),
        )
        profile_ids = (prof.name,) if prof else ()
        if isinstance(eid, WorkloadEndpointID):
            ep: Any = WorkloadEndpoint(
                "active", "cali" + variant, profile_ids=profile_ids, tiers=tiers
            )
        else:
            ep = HostEndpoint(variant, profile_ids=profile_ids, pre_dnat_tiers=tiers)
        self.endpoint_defs[eid] = ep
        self._reconcile(removals_first)

    @rule(eid=st.sampled_from(WEP_IDS + HEP_IDS), removals_first=st.booleans())
    def remove_endpoint(self, eid: Any, removals_first: bool) -> None:
        self.endpoint_defs.pop(eid, None)
        self._reconcile(removals_first)

    @rule(
        pid=st.sampled_from(POLICY_IDS),
        refs=st.lists(st.sampled_from(SET_IDS), unique=True, max_size=2),
        variant=st.sampled_from(VARIANTS),
        removals_first=st.booleans(),
    )
    def redefine_policy(
        self, pid: PolicyID, refs: list[str], variant: str, removals_first: bool
    ) -> None:
        self.policy_defs[pid] = _policy(tuple(refs), variant)
        self._reconcile(removals_first)

    @rule(
        prid=st.sampled_from(PROFILE_IDS),
        ref=st.sampled_from((None, *SET_IDS)),
        removals_first=st.booleans(),
    )
    def redefine_profile(self, prid: ProfileID, ref: str | None, removals_first: bool) -> None:
        refs = (ref,) if ref else ()
        self.profile_defs[prid] = Profile(inbound_rules=(Rule("allow", dst_ip_set_ids=refs),))
        self._reconcile(removals_first)

    @rule(set_id=st.sampled_from(SET_IDS), member=st.sampled_from(MEMBERS))
    def toggle_member(self, set_id: str, member: str) -> None:
        members = self.set_defs[set_id]
        added = member not in members
        if added:
            members.add(member)
        else:
            members.discard(member)
        if set_id in self.model.ipsets:
            self.model.ipsets[set_id] = (IPSetType.NET, set(members))
            if added:
                self.seq.on_ipset_member_added(set_id, member)
            else:
                self.seq.on_ipset_member_removed(set_id, member)

    # flushing
    @rule()
    def flush(self) -> None:
        self.seq.flush()
        assert len(self.batches) <= 1
        for batch in self.batches:
            assert batch, "sink called with an empty batch"
            for msg in batch:
                apply_to_dataplane(self.dp, msg)
        self.batches.clear()
        assert not self.seq.pending()
        assert self.dp.snapshot() == self.model.snapshot()

    @invariant()
    def nothing_emitted_between_flushes(self) -> None:
        assert self.batches == []

    def teardown(self) -> None:
        self.flush()


class PassThroughMachine(SequencerMachine):
    """The reference machine plus keyed pass-through state (hosts, wireguard, routes, ...)."""

    @rule(host=st.sampled_from(HOSTS), variant=st.sampled_from((*VARIANTS, "")), v4=st.booleans())
    def host_update(self, host: str, variant: str, v4: bool) -> None:
        upd = HostMetadataV4V6Update(host, ipv4_addr="10.0.0.1/24" if v4 else "", asnumber=variant)
        self.model.hosts[host] = upd
        if v4:
            self.model.host_ips[host] = "10.0.0.1"
        else:
            self.model.host_ips.pop(host, None)
        self.seq.on_host_metadata_update(upd)

    @rule(host=st.sampled_from(HOSTS))
    def host_remove(self, host: str) -> None:
        self.model.hosts.pop(host, None)
        self.model.host_ips.pop(host, None)
        self.seq.on_host_metadata_remove(host)

    @rule(host=st.sampled_from(HOSTS), key=st.sampled_from(("", "k1", "k2")))
    def wireguard_update(self, host: str, key: str) -> None:
        upd = WireguardEndpointUpdate(host, key)
        if key:
            self.model.wireguard[host] = upd
        else:
            self.model.wireguard.pop(host, None)
        self.seq.on_wireguard_update(upd)

    @rule(host=st.sampled_from(HOSTS))
    def wireguard_remove(self, host: str) -> None:
        self.model.wireguard.pop(host, None)
        self.seq.on_wireguard_remove(host)

    @rule(dst=st.sampled_from(("10.0.0.0/26", "10.0.0.64/26")), node=st.sampled_from(HOSTS))
    def route_update(self, dst: str, node: str) -> None:
        upd = RouteUpdate(dst=dst, dst_node_name=node)
        self.model.routes[dst] = upd
        self.seq.on_route_update(upd)

    @rule(dst=st.sampled_from(("10.0.0.0/26", "10.0.0.64/26")))
    def route_remove(self, dst: str) -> None:
        self.model.routes.pop(dst, None)
        self.seq.on_route_remove(dst)

    @rule(ns=st.sampled_from(("ns1", "ns2")), label=st.sampled_from(VARIANTS))
    def namespace_update(self, ns: str, label: str) -> None:
        self.model.namespaces[NamespaceID(ns)] = NamespaceUpdate(NamespaceID(ns), (("l", label),))
        self.seq.on_namespace_update(NamespaceID(ns), {"l": label})

    @rule(ns=st.sampled_from(("ns1", "ns2")))
    def namespace_remove(self, ns: str) -> None:
        self.model.namespaces.pop(NamespaceID(ns), None)
        self.seq.on_namespace_remove(NamespaceID(ns))

    @rule(g=st.sampled_from(VARIANTS), h=st.sampled_from(("", *VARIANTS)))
    def config_update(self, g: str, h: str) -> None:
        host = {"X": h} if h else {}
        self.model.config = {"X": g, "Y": g, **host}
        self.seq.on_config_update({"X": g}, {"Y": g}, host)


_SETTINGS = settings(max_examples=200, stateful_step_count=50, deadline=None)
TestSequencerReferences = SequencerMachine.TestCase
TestSequencerReferences.settings = _SETTINGS
TestSequencerPassThrough = PassThroughMachine.TestCase
TestSequencerPassThrough.settings = settings(
    max_examples=100, stateful_step_count=50, deadline=None
)
