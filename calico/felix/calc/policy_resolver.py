"""PolicyResolver: each local endpoint's ordered tiers of matching policies.

Inputs: every policy and tier (for ordering), local endpoints, and (policy, endpoint) matches
from the ActiveRulesCalculator. Changes only mark endpoints dirty; :meth:`flush` emits one
endpoint message per dirty endpoint, and nothing at all before the syncer reports InSync, so the
dataplane's first view of each endpoint reflects the complete dataset.

Tier lists (upstream's tierInfoToProtoTierInfo), per tier with >= 1 matching policy:

* untracked: DoNotTrack policies; default action forced to Pass; ingress and egress;
* preDNAT: PreDNAT policies; default action Pass; ingress only;
* forward: ApplyOnForward policies that are neither untracked nor preDNAT; tier default action;
* normal: every policy that is neither untracked nor preDNAT; tier default action.

A list that would be empty in some direction-agnostic sense (no ingress and no egress policy) is
omitted. Workload endpoints get only the normal list; host endpoints get all four.
Staged policies are listed like the others (their ``PolicyID.kind`` starts with ``Staged``); the
dataplane must skip them when programming and must not give a tier that holds only staged
policies an end-of-tier drop.
"""

from __future__ import annotations

from typing import Any

from calico.felix.calc.callbacks import EndpointCallbacks
from calico.felix.calc.policy_sorter import PolicySorter, Tier, policy_meta
from calico.felix.calc.rule_scanner import policy_id
from calico.felix.messages import (
    HostEndpoint,
    HostEndpointID,
    NatInfo,
    PolicyID,
    TierInfo,
    WorkloadEndpoint,
    WorkloadEndpointID,
)
from calico.model import HostEndpointKey, PolicyKey, TierKey, WorkloadEndpointKey
from calico.model import values as v1
from calico.syncer.api import SyncStatus

EndpointKey = WorkloadEndpointKey | HostEndpointKey
EndpointValue = v1.WorkloadEndpoint | v1.HostEndpoint


def wep_id(key: WorkloadEndpointKey) -> WorkloadEndpointID:
    return WorkloadEndpointID(key.orchestrator_id, key.workload_id, key.endpoint_id)


def hep_id(key: HostEndpointKey) -> HostEndpointID:
    return HostEndpointID(key.endpoint_id)


def _nats(nats: tuple[v1.IPNAT, ...]) -> tuple[NatInfo, ...]:
    return tuple(NatInfo(ext_ip=n.ext_ip, int_ip=n.int_ip) for n in nats)


def workload_message(
    value: v1.WorkloadEndpoint, tiers: tuple[TierInfo, ...], bgp_peer_name: str = ""
) -> WorkloadEndpoint:
    """A v1 workload endpoint plus its tiers (and local BGP peer) as the dataplane message."""
    return WorkloadEndpoint(
        state=value.state or "active",
        name=value.name,
        mac=value.mac or "",
        profile_ids=value.profile_ids,
        ipv4_nets=value.ipv4_nets,
        ipv6_nets=value.ipv6_nets,
        tiers=tiers,
        ipv4_nat=_nats(value.ipv4_nat),
        ipv6_nat=_nats(value.ipv6_nat),
        allow_spoofed_source_prefixes=value.allow_spoofed_source_ips,
        annotations=tuple(sorted(value.annotations.items())),
        bgp_peer_name=bgp_peer_name,
    )


def host_message(
    value: v1.HostEndpoint,
    tiers: tuple[TierInfo, ...],
    untracked: tuple[TierInfo, ...],
    pre_dnat: tuple[TierInfo, ...],
    forward: tuple[TierInfo, ...],
) -> HostEndpoint:
    return HostEndpoint(
        name=value.name,
        profile_ids=value.profile_ids,
        tiers=tiers,
        untracked_tiers=untracked,
        pre_dnat_tiers=pre_dnat,
        forward_tiers=forward,
        expected_ipv4_addrs=value.expected_ipv4_addrs,
        expected_ipv6_addrs=value.expected_ipv6_addrs,
    )


class _TierLists:
    """Accumulates the ingress/egress policy IDs of one tier-list kind for one tier."""

    __slots__ = ("egress", "ingress")

    def __init__(self) -> None:
        self.ingress: list[PolicyID] = []
        self.egress: list[PolicyID] = []

    def add(self, pid: PolicyID, ingress: bool, egress: bool) -> None:
        if ingress:
            self.ingress.append(pid)
        if egress:
            self.egress.append(pid)

    def info(self, name: str, default_action: str) -> TierInfo | None:
        if not self.ingress and not self.egress:
            return None
        return TierInfo(name, tuple(self.ingress), tuple(self.egress), default_action)


def split_tiers(
    sorter: PolicySorter, grouped: list[tuple[Tier, list[PolicyKey]]]
) -> tuple[tuple[TierInfo, ...], ...]:
    """(normal, untracked, preDNAT, forward) tier lists for sorted, grouped policies."""
    out: tuple[list[TierInfo], ...] = ([], [], [], [])
    for tier, keys in grouped:
        lists = (_TierLists(), _TierLists(), _TierLists(), _TierLists())
        normal, untracked, pre_dnat, forward = lists
        for key in keys:
            meta = sorter.meta(key)
            assert meta is not None
            pid = policy_id(key)
            if meta.untracked:
                untracked.add(pid, meta.ingress, meta.egress)
            elif meta.pre_dnat:
                pre_dnat.add(pid, meta.ingress, False)
            else:
                if meta.apply_on_forward:
                    forward.add(pid, meta.ingress, meta.egress)
                normal.add(pid, meta.ingress, meta.egress)
        actions = (tier.default_action, "Pass", "Pass", tier.default_action)
        for acc, lst, action in zip(out, lists, actions, strict=True):
            if (info := lst.info(tier.name, action)) is not None:
                acc.append(info)
    return tuple(tuple(x) for x in out)


class PolicyResolver:
    """See the module docstring."""

    def __init__(self, callbacks: EndpointCallbacks) -> None:
        self._callbacks = callbacks
        self._sorter = PolicySorter()
        self._endpoints: dict[EndpointKey, EndpointValue] = {}
        self._policies_by_endpoint: dict[EndpointKey, set[PolicyKey]] = {}
        self._endpoints_by_policy: dict[PolicyKey, set[EndpointKey]] = {}
        self._dirty: set[EndpointKey] = set()
        self._bgp_peer_names: dict[WorkloadEndpointKey, str] = {}
        self._in_sync = False

    @property
    def sorter(self) -> PolicySorter:
        return self._sorter

    # -- fan-out handlers ----------------------------------------------------------------

    def on_policy(self, key: PolicyKey, value: v1.Policy | None) -> None:
        meta = None if value is None else policy_meta(key, value)
        if self._sorter.on_policy(key, meta):
            self._dirty.update(self._endpoints_by_policy.get(key, ()))

    def on_tier(self, key: TierKey, value: v1.Tier | None) -> None:
        if self._sorter.on_tier(key.name, value):
            for pkey in self._sorter.policies_in_tier(key.name):
                self._dirty.update(self._endpoints_by_policy.get(pkey, ()))

    def on_endpoint(self, key: EndpointKey, value: EndpointValue | None) -> None:
        """Called for each local endpoint update."""
        if value is None:
            if isinstance(key, WorkloadEndpointKey):
                self._bgp_peer_names.pop(key, None)
            if self._endpoints.pop(key, None) is not None:
                self._dirty.add(key)
        elif self._endpoints.get(key) != value:
            self._endpoints[key] = value
            self._dirty.add(key)

    def on_endpoint_bgp_peer(self, key: WorkloadEndpointKey, name: str) -> None:
        """From the LocalBGPPeerCalculator: the BGPPeer local workload ``key`` peers with."""
        if self._bgp_peer_names.get(key, "") == name:
            return
        if name:
            self._bgp_peer_names[key] = name
        else:
            self._bgp_peer_names.pop(key, None)
        if key in self._endpoints:
            self._dirty.add(key)

    def on_status(self, status: SyncStatus) -> None:
        if status is SyncStatus.IN_SYNC:
            self._in_sync = True

    # -- match listener (from the ARC) ----------------------------------------------------

    def on_policy_match(self, policy_key: PolicyKey, endpoint_key: EndpointKey) -> None:
        self._policies_by_endpoint.setdefault(endpoint_key, set()).add(policy_key)
        self._endpoints_by_policy.setdefault(policy_key, set()).add(endpoint_key)
        self._dirty.add(endpoint_key)

    def on_policy_match_stopped(self, policy_key: PolicyKey, endpoint_key: EndpointKey) -> None:
        _discard(self._policies_by_endpoint, endpoint_key, policy_key)
        _discard(self._endpoints_by_policy, policy_key, endpoint_key)
        self._dirty.add(endpoint_key)

    # -- output -----------------------------------------------------------------------------

    def flush(self) -> None:
        """Emit an update (or removal) for each dirty endpoint; a no-op before InSync."""
        if not self._in_sync or not self._dirty:
            return
        dirty, self._dirty = self._dirty, set()
        for key in sorted(dirty, key=_endpoint_sort_key):
            self._emit(key)

    def _emit(self, key: EndpointKey) -> None:
        value = self._endpoints.get(key)
        if isinstance(key, WorkloadEndpointKey):
            if not isinstance(value, v1.WorkloadEndpoint):
                self._callbacks.on_workload_endpoint_update(wep_id(key), None)
                return
            normal, _u, _p, _f = self._tiers_for(key)
            self._callbacks.on_workload_endpoint_update(
                wep_id(key), workload_message(value, normal, self._bgp_peer_names.get(key, ""))
            )
        else:
            if not isinstance(value, v1.HostEndpoint):
                self._callbacks.on_host_endpoint_update(hep_id(key), None)
                return
            normal, untracked, pre_dnat, forward = self._tiers_for(key)
            self._callbacks.on_host_endpoint_update(
                hep_id(key), host_message(value, normal, untracked, pre_dnat, forward)
            )

    def _tiers_for(self, key: EndpointKey) -> tuple[tuple[TierInfo, ...], ...]:
        matched = list(self._policies_by_endpoint.get(key, ()))
        return split_tiers(self._sorter, self._sorter.sort_policies(matched))


def _discard(index: dict[Any, set[Any]], key: Any, item: Any) -> None:
    items = index.get(key)
    if items is not None:
        items.discard(item)
        if not items:
            del index[key]


def _endpoint_sort_key(key: EndpointKey) -> str:
    return repr(key)  # deterministic emission order (the sequencer does not depend on it)
