"""Hand-written scenarios for the whole graph, fed v3 YAML through the real update processors.

Each scenario checks the emitted messages and, at the end, that the dataplane state built from
them equals the oracle's from-scratch state for the same snapshot.
"""

from __future__ import annotations

from typing import Any

from oracle import ENDPOINT_MESSAGES, DataplaneState, desired_state
from recording_callbacks import updates_from_yaml

from calico.felix.calc.calc_graph import build_felix_calc_pipeline
from calico.felix.calc.pipeline import CalcPipeline
from calico.felix.calc.rule_scanner import IPSetData
from calico.felix.messages import (
    ActivePolicyRemove,
    ActivePolicyUpdate,
    ActiveProfileUpdate,
    HostEndpointID,
    InSync,
    IPSetType,
    IPSetUpdate,
    PolicyID,
    PolicyPrepare,
    ProfileID,
    TierInfo,
    WorkloadEndpointID,
)
from calico.model import IPAMHandleKey, PolicyKey
from calico.model import values as v1
from calico.selector import parse
from calico.syncer.api import SyncStatus, Update, UpdateType

HOST = "h1"
WEP1 = WorkloadEndpointID("k8s", "ns1/pod1", "eth0")


def wep(name: str, labels: str = "{}", *, node: str = HOST, ns: str = "ns1", **spec: str) -> str:
    pod = name
    ip = spec.pop("ip", None) or "10.0.0.1/32"
    extra = "".join(f", {k}: {v}" for k, v in spec.items())
    return f"""
apiVersion: projectcalico.org/v3
kind: WorkloadEndpoint
metadata: {{name: {node}-k8s-{pod}-eth0, namespace: {ns}, labels: {labels}}}
spec: {{node: {node}, orchestrator: k8s, pod: {pod}, endpoint: eth0, interfaceName: cali{pod},
        ipNetworks: [{ip}]{extra}}}
"""


class Harness:
    """A synchronous pipeline plus the dataplane state its messages build."""

    def __init__(self) -> None:
        self.batches: list[list[Any]] = []
        self.state = DataplaneState()
        self.snapshot: dict[Any, Any] = {}
        self.pipeline: CalcPipeline = build_felix_calc_pipeline(HOST, self._sink, synchronous=True)
        self.in_sync = False

    def _sink(self, batch: list[Any]) -> None:
        self.batches.append(batch)
        self.state.apply_all(batch)

    def apply(self, text: str, *, delete: bool = False) -> None:
        for key, value in updates_from_yaml(text, delete=delete):
            self.snapshot[key] = value
            utype = UpdateType.DELETED if value is None else UpdateType.UPDATED
            self.pipeline.on_updates([Update(key, value, "1", utype)])

    def sync(self) -> list[Any]:
        if not self.in_sync:
            self.in_sync = True
            self.pipeline.on_status_updated(SyncStatus.IN_SYNC)
        return self.flush()

    def flush(self) -> list[Any]:
        before = len(self.batches)
        self.pipeline.flush()
        return [m for b in self.batches[before:] for m in b]

    def check_oracle(self) -> None:
        want = desired_state(self.snapshot, HOST).comparable()
        assert self.state.comparable() == want


def sel_set(selector: str) -> str:
    return parse(selector).unique_id


def test_nothing_endpoint_related_before_in_sync_and_in_sync_after_first_flush() -> None:
    h = Harness()
    h.pipeline.on_status_updated(SyncStatus.RESYNC_IN_PROGRESS)
    h.apply(wep("pod1", "{app: web}"))
    h.apply(
        """
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: p1, namespace: ns1}
spec: {selector: app == 'web', ingress: [{action: Allow, source: {selector: app == 'web'}}]}
"""
    )
    early = h.flush()
    assert not any(isinstance(m, ENDPOINT_MESSAGES) for m in early)
    assert not any(isinstance(m, InSync) for m in early)
    assert any(isinstance(m, ActivePolicyUpdate) for m in early)  # rules may go early
    msgs = h.sync()
    assert isinstance(msgs[-1], InSync)
    assert [type(m).__name__ for m in msgs].count("WorkloadEndpointUpdate") == 1
    ep = h.state.weps[WEP1]
    assert ep.tiers == (TierInfo("default", (PolicyID("p1", "NetworkPolicy", "ns1"),), ()),)
    assert not any(isinstance(m, InSync) for m in h.flush())  # only once
    h.check_oracle()


def test_selector_ip_set_members_and_rule_ids() -> None:
    h = Harness()
    h.apply(wep("pod1", "{app: web}") + "---" + wep("pod2", "{app: web}", node="h2", ip="10.0.0.2"))
    h.apply(
        """
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: gp}
spec:
  selector: app == 'web'
  ingress:
  - {action: Allow, source: {selector: app == 'web', notSelector: has(bad)}}
  - {action: Allow, source: {notSelector: has(bad)}}
"""
    )
    h.sync()
    policy = h.state.policies[PolicyID("gp", "GlobalNetworkPolicy")]
    combined = sel_set("(app == 'web') && (!(has(bad)))")
    first, second = policy.inbound_rules
    assert first.src_ip_set_ids == (combined,) and first.not_src_ip_set_ids == ()
    assert second.not_src_ip_set_ids == (sel_set("has(bad)"),)
    assert first.rule_id != second.rule_id and len(first.rule_id) == 16
    # The remote endpoint contributes its IP; it gets no endpoint message of its own.
    assert h.state.ipsets[combined] == (IPSetType.NET, {"10.0.0.1/32", "10.0.0.2/32"})
    assert list(h.state.weps) == [WEP1]
    h.check_oracle()


def test_named_ports_replace_the_selector_set() -> None:
    h = Harness()
    h.apply(wep("pod1", "{app: db}", ports="[{name: sql, port: 5432, protocol: TCP}]"))
    h.apply(
        """
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: gp}
spec:
  selector: all()
  egress:
  - {action: Allow, protocol: TCP, destination: {selector: app == 'db', ports: [sql]}}
  - {action: Allow, protocol: TCP, destination: {selector: app == 'db', ports: [sql, 80]}}
"""
    )
    h.sync()
    named = IPSetData(parse("app == 'db'").canonical, "tcp", "sql")
    only_named, mixed = h.state.policies[PolicyID("gp", "GlobalNetworkPolicy")].outbound_rules
    assert only_named.dst_named_port_ip_set_ids == (named.id,)
    assert only_named.dst_ip_set_ids == ()  # the named-port set already filters by selector
    assert mixed.dst_ip_set_ids == (sel_set("app == 'db'"),)
    assert mixed.dst_ports[0].first == 80
    assert h.state.ipsets[named.id] == (IPSetType.IP_AND_PORT, {"10.0.0.1,tcp:5432"})
    h.check_oracle()


def test_namespace_selector_and_service_accounts_match_through_profiles() -> None:
    h = Harness()
    h.apply(
        wep("pod1", "{}", profiles="[kns.ns1]", serviceAccountName="sa1")
        + """
---
apiVersion: projectcalico.org/v3
kind: Profile
metadata: {name: kns.ns1}
spec: {labelsToApply: {pcns.team: a}, ingress: [{action: Allow}], egress: [{action: Allow}]}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: gp}
spec:
  selector: all()
  ingress:
  - {action: Allow, source: {namespaceSelector: team == 'a'}}
  - {action: Allow, source: {serviceAccounts: {names: [sa1]}}}
"""
    )
    h.sync()
    ns_rule, sa_rule = h.state.policies[PolicyID("gp", "GlobalNetworkPolicy")].inbound_rules
    assert h.state.ipsets[ns_rule.src_ip_set_ids[0]][1] == {"10.0.0.1/32"}
    assert h.state.ipsets[sa_rule.src_ip_set_ids[0]][1] == {"10.0.0.1/32"}
    # Namespace label change through the profile removes the member.
    h.apply(
        """
apiVersion: projectcalico.org/v3
kind: Profile
metadata: {name: kns.ns1}
spec: {labelsToApply: {pcns.team: b}, ingress: [{action: Allow}], egress: [{action: Allow}]}
"""
    )
    h.flush()
    assert h.state.ipsets[ns_rule.src_ip_set_ids[0]][1] == set()
    assert h.state.profiles[ProfileID("kns.ns1")].inbound_rules[0].action == "allow"
    h.check_oracle()


def test_tiers_pass_and_ordering() -> None:
    h = Harness()
    h.apply(
        wep("pod1", "{app: web}")
        + """
---
apiVersion: projectcalico.org/v3
kind: Tier
metadata: {name: security}
spec: {order: 100, defaultAction: Pass}
---
apiVersion: projectcalico.org/v3
kind: Tier
metadata: {name: default}
spec: {order: 1000000}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: security.pass-all}
spec: {tier: security, selector: all(), ingress: [{action: Pass}]}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: b}
spec: {selector: all(), order: 10, ingress: [{action: Allow}]}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: a}
spec: {selector: all(), order: 10, ingress: [{action: Allow}]}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: first}
spec: {selector: all(), order: 1, ingress: [{action: Allow}]}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: unordered}
spec: {selector: all(), ingress: [{action: Allow}]}
"""
    )
    h.sync()
    tiers = h.state.weps[WEP1].tiers
    assert [(t.name, t.default_action) for t in tiers] == [
        ("security", "Pass"),
        ("default", "Deny"),
    ]
    assert [p.name for p in tiers[1].ingress_policies] == ["first", "a", "b", "unordered"]
    pass_rule = h.state.policies[PolicyID("security.pass-all", "GlobalNetworkPolicy")]
    assert pass_rule.inbound_rules[0].action == "next-tier"
    # Deleting the Tier resource sends its policies after every valid tier.
    h.apply(
        "apiVersion: projectcalico.org/v3\nkind: Tier\nmetadata: {name: security}\n", delete=True
    )
    h.flush()
    assert [t.name for t in h.state.weps[WEP1].tiers] == ["default", "security"]
    assert h.state.weps[WEP1].tiers[1].default_action == "Deny"
    h.check_oracle()


def test_staged_policies_are_sent_marked_and_listed() -> None:
    h = Harness()
    h.apply(
        wep("pod1", "{app: web}")
        + """
---
apiVersion: projectcalico.org/v3
kind: StagedGlobalNetworkPolicy
metadata: {name: what-if}
spec: {selector: all(), ingress: [{action: Deny}]}
"""
    )
    h.sync()
    pid = PolicyID("what-if", "StagedGlobalNetworkPolicy")
    assert h.state.policies[pid].staged
    assert h.state.weps[WEP1].tiers == (TierInfo("default", (pid,), ()),)
    h.check_oracle()


def test_host_endpoint_tier_lists() -> None:
    h = Harness()
    docs = [
        """
apiVersion: projectcalico.org/v3
kind: HostEndpoint
metadata: {name: hep1, labels: {role: gw}}
spec: {node: h1, interfaceName: eth0, expectedIPs: [192.168.0.1]}
"""
    ]
    for name, flags in (
        ("untracked", "doNotTrack: true, applyOnForward: true, "),
        ("prednat", "preDNAT: true, applyOnForward: true, "),
        ("forward", "applyOnForward: true, "),
        ("normal", ""),
    ):
        egress = "" if name == "prednat" else ", egress: [{action: Allow}]"
        docs.append(
            f"""
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {{name: {name}}}
spec: {{{flags}selector: role == 'gw', ingress: [{{action: Allow}}]{egress}}}
"""
        )
    h.apply("---".join(docs))
    h.sync()
    ep = h.state.heps[HostEndpointID("hep1")]
    gnp = "GlobalNetworkPolicy"
    assert ep.untracked_tiers == (
        TierInfo("default", (PolicyID("untracked", gnp),), (PolicyID("untracked", gnp),), "Pass"),
    )
    assert ep.pre_dnat_tiers == (TierInfo("default", (PolicyID("prednat", gnp),), (), "Pass"),)
    assert ep.forward_tiers == (
        TierInfo("default", (PolicyID("forward", gnp),), (PolicyID("forward", gnp),)),
    )
    normal = (PolicyID("forward", gnp), PolicyID("normal", gnp))
    assert ep.tiers == (TierInfo("default", normal, normal),)
    assert ep.expected_ipv4_addrs == ("192.168.0.1",)
    h.check_oracle()


def test_missing_profile_becomes_deny_all_and_then_real() -> None:
    h = Harness()
    h.apply(wep("pod1", "{}", profiles="[nosuch]"))
    h.sync()
    deny = h.state.profiles[ProfileID("nosuch")]
    assert [r.action for r in deny.inbound_rules + deny.outbound_rules] == ["deny", "deny"]
    h.apply(
        """
apiVersion: projectcalico.org/v3
kind: Profile
metadata: {name: nosuch}
spec: {ingress: [{action: Allow}]}
"""
    )
    msgs = h.flush()
    assert any(isinstance(m, ActiveProfileUpdate) for m in msgs)
    assert [r.action for r in h.state.profiles[ProfileID("nosuch")].inbound_rules] == ["allow"]
    h.check_oracle()


def test_label_change_deactivates_policy_and_removes_its_ip_sets() -> None:
    h = Harness()
    h.apply(
        wep("pod1", "{app: web}")
        + """
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: gp}
spec: {selector: app == 'web', ingress: [{action: Allow, source: {selector: app == 'db'}}]}
"""
    )
    h.sync()
    assert sel_set("app == 'db'") in h.state.ipsets
    h.apply(wep("pod1", "{app: other}"))
    msgs = h.flush()
    names = [type(m).__name__ for m in msgs]
    assert names == ["WorkloadEndpointUpdate", "ActivePolicyRemove", "IPSetRemove"]
    assert isinstance(msgs[1], ActivePolicyRemove)
    assert h.state.ipsets == {} and h.state.weps[WEP1].tiers == ()
    h.check_oracle()


def test_invalid_policy_is_treated_as_deleted() -> None:
    h = Harness()
    h.apply(
        wep("pod1", "{app: web}")
        + """
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: gp}
spec: {selector: app == 'web', ingress: [{action: Allow}]}
"""
    )
    h.sync()
    assert h.state.policies
    bad = v1.Policy(selector="app ==", tier="default")
    key = PolicyKey("GlobalNetworkPolicy", "", "gp")
    h.pipeline.on_updates([Update(key, bad, "2", UpdateType.UPDATED)])
    h.flush()
    assert h.state.policies == {} and h.state.weps[WEP1].tiers == ()


def test_unknown_keys_are_ignored_and_ip_set_update_lists_members() -> None:
    h = Harness()
    # A key type no calculation node consumes (IPAM handles) is dropped by the fan-out.
    h.pipeline.on_updates([Update(IPAMHandleKey("h1"), {"x": 1}, "1", UpdateType.NEW)])
    h.apply(
        wep("pod1", "{app: web}")
        + """
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkSet
metadata: {name: world, labels: {app: web}}
spec: {nets: [0.0.0.0/0]}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: gp}
spec: {selector: all(), ingress: [{action: Allow, source: {selector: app == 'web'}}]}
"""
    )
    msgs = h.sync()
    update = next(m for m in msgs if isinstance(m, IPSetUpdate))
    assert set(update.members) == {"10.0.0.1/32", "0.0.0.0/1", "128.0.0.0/1"}
    h.check_oracle()


def test_async_pipeline_end_to_end() -> None:
    import threading

    got: list[Any] = []
    done = threading.Event()

    def sink(batch: list[Any]) -> None:
        got.extend(batch)
        if any(isinstance(m, InSync) for m in batch):
            done.set()

    calc = build_felix_calc_pipeline(HOST, sink)
    calc.start()
    try:
        updates = updates_from_yaml(wep("pod1", "{app: web}"))
        calc.on_updates([Update(k, v, "1", UpdateType.NEW) for k, v in updates])
        calc.on_status_updated(SyncStatus.IN_SYNC)
        assert done.wait(10)
    finally:
        calc.stop()
    assert any(type(m).__name__ == "WorkloadEndpointUpdate" for m in got)


def test_an_inactive_policy_is_prepared_after_in_sync_and_its_activation_reuses_it() -> None:
    """design/felix-calc.md "Preparing inactive policies": nothing before InSync or while
    output is unflushed; then a PolicyPrepare batch alone, and the activation carries the
    very Policy object prepared."""
    h = Harness()
    h.apply(
        """
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: p1, namespace: ns1}
spec: {selector: app == 'web', ingress: [{action: Allow, source: {selector: role == 'db'}}]}
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: p2, namespace: ns1}
spec: {selector: app == 'db', ingress: [{action: Allow}]}
"""
    )
    assert not h.pipeline.wants_prepare and h.pipeline.prepare(10) == 0  # not in sync
    h.sync()
    assert h.pipeline.wants_prepare
    h.apply(wep("pod2", "{app: db}"))  # activates p2: output the dataplane has not seen
    assert h.pipeline.prepare(10) == 0
    h.flush()
    before = len(h.batches)
    assert h.pipeline.prepare(10) == 1
    (prepared,) = h.batches[before]
    assert isinstance(prepared, PolicyPrepare) and prepared.id.name == "p1"
    assert not h.pipeline.wants_prepare and h.pipeline.prepare(10) == 0  # once per value
    h.apply(wep("pod1", "{app: web}"))
    (update,) = [m for m in h.flush() if isinstance(m, ActivePolicyUpdate)]
    assert update.id == prepared.id and update.policy is prepared.policy
    h.check_oracle()
