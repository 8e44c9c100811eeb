"""PolicyResolver and PolicySorter: ordering, direction flags, tier lists, InSync gating."""

from __future__ import annotations

from typing import Any

from calico.felix.calc.policy_resolver import PolicyResolver
from calico.felix.calc.policy_sorter import PolicySorter, policy_meta
from calico.felix.messages import HostEndpointID, PolicyID, TierInfo, WorkloadEndpointID
from calico.model import HostEndpointKey, PolicyKey, TierKey, WorkloadEndpointKey
from calico.model import values as v1
from calico.model.values import decode_value
from calico.syncer.api import SyncStatus

GNP = "GlobalNetworkPolicy"
WEP = WorkloadEndpointKey("h1", "k8s", "ns/pod", "eth0")
WEP_ID = WorkloadEndpointID("k8s", "ns/pod", "eth0")
HEP = HostEndpointKey("h1", "hep")


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def __getattr__(self, name: str) -> Any:
        return lambda *args: self.calls.append((name, *args))


def pk(name: str, kind: str = GNP, ns: str = "") -> PolicyKey:
    return PolicyKey(kind, ns, name)


def pid(name: str, kind: str = GNP, ns: str = "") -> PolicyID:
    return PolicyID(name, kind, ns)


def resolver_with(policies: dict[PolicyKey, dict[str, Any]], endpoint: Any = WEP):
    rec = Recorder()
    res = PolicyResolver(rec)
    res.on_endpoint(endpoint, decode_value(endpoint, {"name": "x", "profile_ids": ["p"]}))
    for key, value in policies.items():
        res.on_policy(key, decode_value(key, value))
        res.on_policy_match(key, endpoint)
    return res, rec


def test_nothing_before_in_sync_then_everything() -> None:
    res, rec = resolver_with({pk("a"): {"tier": "default"}})
    res.flush()
    assert rec.calls == []
    res.on_status(SyncStatus.IN_SYNC)
    res.flush()
    ((name, eid, ep),) = rec.calls
    assert (name, eid) == ("on_workload_endpoint_update", WEP_ID)
    assert ep.tiers == (TierInfo("default", (pid("a"),), (pid("a"),)),)
    assert ep.profile_ids == ("p",)
    rec.calls.clear()
    res.flush()
    assert rec.calls == []  # nothing dirty


def test_policy_order_types_and_tie_breaks() -> None:
    res, rec = resolver_with(
        {
            pk("z"): {"tier": "default", "order": 1, "types": ["ingress"]},
            pk("b"): {"tier": "default", "types": ["egress"]},
            pk("a"): {"tier": "default"},
            pk("a", "NetworkPolicy", "ns"): {"tier": "default", "order": 5},
            pk("m"): {"tier": "default", "order": 5},
        }
    )
    res.on_status(SyncStatus.IN_SYNC)
    res.flush()
    (tier,) = rec.calls[0][2].tiers
    assert tier.ingress_policies == (pid("z"), pid("a", "NetworkPolicy", "ns"), pid("m"), pid("a"))
    assert tier.egress_policies == (pid("a", "NetworkPolicy", "ns"), pid("m"), pid("a"), pid("b"))


def test_tier_order_valid_first_then_order_then_name() -> None:
    pols = {pk(f"p{t}"): {"tier": t} for t in ("missing", "t-none", "t2", "t1", "t1b")}
    res, rec = resolver_with(pols)
    for name, value in (
        ("t-none", {"defaultAction": "Pass"}),
        ("t2", {"order": 2}),
        ("t1", {"order": 1}),
        ("t1b", {"order": 1}),
    ):
        res.on_tier(TierKey(name), v1.Tier.from_json(value))
    res.on_status(SyncStatus.IN_SYNC)
    res.flush()
    tiers = rec.calls[-1][2].tiers
    assert [(t.name, t.default_action) for t in tiers] == [
        ("t1", "Deny"),
        ("t1b", "Deny"),
        ("t2", "Deny"),
        ("t-none", "Pass"),
        ("missing", "Deny"),
    ]
    rec.calls.clear()
    res.on_tier(TierKey("t1"), None)  # t1 becomes invalid: sorts after every valid tier
    res.flush()
    assert [t.name for t in rec.calls[-1][2].tiers][-2:] == ["missing", "t1"]


def test_host_endpoint_split_and_removal() -> None:
    res, rec = resolver_with(
        {
            pk("u"): {"tier": "default", "untracked": True, "apply_on_forward": True},
            pk("p"): {"tier": "default", "pre_dnat": True, "types": ["ingress", "egress"]},
            pk("f"): {"tier": "default", "apply_on_forward": True, "types": ["egress"]},
        },
        endpoint=HEP,
    )
    res.on_status(SyncStatus.IN_SYNC)
    res.flush()
    ((name, eid, ep),) = rec.calls
    assert (name, eid) == ("on_host_endpoint_update", HostEndpointID("hep"))
    assert ep.untracked_tiers == (TierInfo("default", (pid("u"),), (pid("u"),), "Pass"),)
    assert ep.pre_dnat_tiers == (TierInfo("default", (pid("p"),), (), "Pass"),)
    assert ep.forward_tiers == (TierInfo("default", (), (pid("f"),)),)
    assert ep.tiers == (TierInfo("default", (), (pid("f"),)),)
    rec.calls.clear()
    res.on_policy_match_stopped(pk("f"), HEP)
    res.on_endpoint(HEP, None)
    res.flush()
    assert rec.calls == [("on_host_endpoint_update", HostEndpointID("hep"), None)]


def test_sorter_reports_changes_only() -> None:
    sorter = PolicySorter()
    key = pk("a")
    meta = policy_meta(key, v1.Policy(tier="t", order=3))
    assert sorter.on_policy(key, meta)
    assert not sorter.on_policy(key, meta)
    assert sorter.on_tier("t", v1.Tier(order=1))
    assert not sorter.on_tier("t", v1.Tier(order=1))
    assert sorter.on_policy(key, None)
    assert sorter.tier("t") is not None  # still valid (resource exists)
    assert sorter.on_tier("t", None) and sorter.tier("t") is None
    assert policy_meta(pk("s", "StagedGlobalNetworkPolicy"), v1.Policy()).staged
