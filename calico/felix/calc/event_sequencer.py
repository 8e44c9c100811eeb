"""EventSequencer: buffers calc-graph callbacks, coalesces them, flushes in dependency order.

Why it exists: calculation nodes emit changes in whatever order they compute them, but the
dataplane must never see a reference to something it does not have (a policy naming an IP set
not yet created, an endpoint naming a policy already removed). The sequencer holds everything
since the last flush, cancels changes that undo each other, and ``flush()`` emits one batch in
the fixed order of upstream's ``EventSequencer.Flush`` (design/felix-calc-sequencer.md):
creations from the bottom of the dependency tree up, deletions from the top down.

Contracts:
- A delete is queued only for something already sent; an update cancels a pending delete and
  a delete cancels a pending update.
- An update equal to what was last sent is suppressed (a deliberate deviation: upstream re-sends
  it; the dataplane result is identical and it saves work).
- IP sets: added before any member event, removed after the last user; ``IPSetUpdate`` carries
  the complete membership. Breaking that is a programming error: ``SequencerError``.
- Not thread-safe: owned by the calculation-graph thread. Within a step, output is sorted by id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

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
    ServiceAccountID,
    ServiceAccountRemove,
    ServiceAccountUpdate,
    ServiceRemove,
    ServiceUpdate,
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

log = logging.getLogger(__name__)

Sink = Callable[[list[ToDataplane]], None]
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
_MISSING: Any = object()


class SequencerError(AssertionError):
    """A caller broke the callback contract (e.g. a member event for an unknown IP set)."""


def _fail(msg: str, **fields: object) -> SequencerError:
    detail = " ".join(f"{k}={v!r}" for k, v in fields.items())
    log.error("BUG in calculation graph: %s %s", msg, detail)
    return SequencerError(f"{msg} {detail}".strip())


def _sorted_labels(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


class _Channel(Generic[K, V]):
    """Pending updates/deletes plus what downstream already has, for one keyed resource."""

    def __init__(self) -> None:
        self.sent: dict[K, V] = {}
        self.updates: dict[K, V] = {}
        self.deletes: set[K] = set()

    def update(self, key: K, value: V) -> None:
        self.deletes.discard(key)
        if self.sent.get(key, _MISSING) == value:
            self.updates.pop(key, None)  # downstream already has exactly this
        else:
            self.updates[key] = value

    def remove(self, key: K) -> None:
        self.updates.pop(key, None)
        if key in self.sent:
            self.deletes.add(key)

    def pending(self) -> bool:
        return bool(self.updates or self.deletes)

    def take_updates(self) -> list[tuple[K, V]]:
        out = [(k, self.updates[k]) for k in sorted(self.updates)]
        self.sent.update(self.updates)
        self.updates.clear()
        return out

    def take_deletes(self) -> list[K]:
        out = sorted(self.deletes)
        for key in out:
            del self.sent[key]
        self.deletes.clear()
        return out


class _IPSets:
    """IP set lifecycle and member deltas (steps 3, 4 and 11 of the flush)."""

    def __init__(self) -> None:
        self.sent: set[str] = set()
        self.added: dict[str, IPSetType] = {}  # pending adds (fresh, complete sets)
        self.removed: set[str] = set()  # pending removes (only of sent sets)
        self.members_added: dict[str, set[str]] = {}
        self.members_removed: dict[str, set[str]] = {}

    def pending(self) -> bool:
        return bool(self.added or self.removed or self.members_added or self.members_removed)

    def _drop_deltas(self, set_id: str) -> None:
        self.members_added.pop(set_id, None)
        self.members_removed.pop(set_id, None)

    def add(self, set_id: str, set_type: IPSetType) -> None:
        if set_id in self.added or (set_id in self.sent and set_id not in self.removed):
            raise _fail("IP set added twice without a removal", set_id=set_id)
        self.removed.discard(set_id)
        self._drop_deltas(set_id)  # a (re-)added set starts empty and is sent in full
        self.added[set_id] = set_type

    def remove(self, set_id: str) -> None:
        if set_id not in self.added and (set_id not in self.sent or set_id in self.removed):
            raise _fail("removal of an unknown IP set", set_id=set_id)
        self.added.pop(set_id, None)
        self._drop_deltas(set_id)
        if set_id in self.sent:
            self.removed.add(set_id)

    def member_change(self, set_id: str, member: str, add: bool) -> None:
        fresh = set_id in self.added  # a snapshot's sets: the one lookup it needs here
        if not fresh and (set_id not in self.sent or set_id in self.removed):
            raise _fail("member event for an unknown IP set", set_id=set_id, member=member)
        same, opposite = (
            (self.members_added, self.members_removed)
            if add
            else (self.members_removed, self.members_added)
        )
        opp = opposite.get(set_id)
        if opp is not None and member in opp:
            opp.discard(member)  # cancels a pending change of the opposite sign
            if not opp:
                del opposite[set_id]
        elif fresh and not add:
            pass  # a fresh set's member list is complete: nothing to remove downstream
        else:
            members = same.get(set_id)  # not setdefault: no throwaway set per member
            if members is None:
                same[set_id] = {member}
            else:
                members.add(member)

    def take_added(self) -> list[IPSetUpdate]:
        out = []
        for set_id in sorted(self.added):
            members = tuple(sorted(self.members_added.pop(set_id, ())))
            out.append(IPSetUpdate(id=set_id, members=members, type=self.added[set_id]))
        self.sent.update(self.added)
        self.added.clear()
        return out

    def take_deltas(self) -> list[IPSetDeltaUpdate]:
        ids = sorted(self.members_added.keys() | self.members_removed.keys())
        out = [
            IPSetDeltaUpdate(
                id=set_id,
                added_members=tuple(sorted(self.members_added.get(set_id, ()))),
                removed_members=tuple(sorted(self.members_removed.get(set_id, ()))),
            )
            for set_id in ids
        ]
        self.members_added.clear()
        self.members_removed.clear()
        return out

    def take_removed(self) -> list[IPSetRemove]:
        out = [IPSetRemove(id=set_id) for set_id in sorted(self.removed)]
        self.sent.difference_update(self.removed)
        self.removed.clear()
        return out


class _Latest(Generic[V]):
    """A single pending value, emitted only if it differs from the last one sent."""

    def __init__(self) -> None:
        self.pending: V | None = None
        self.sent: V | None = None

    def set(self, value: V) -> None:
        self.pending = None if value == self.sent else value

    def take(self) -> V | None:
        value, self.pending = self.pending, None
        if value is not None:
            self.sent = value
        return value


class EventSequencer:
    """Implements ``PipelineCallbacks``; ``flush()`` hands one ordered batch to ``sink``."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._not_ready = False
        self._config_parts: tuple[dict[str, str], dict[str, str], dict[str, str]] | None = None
        self._sent_config: dict[str, str] | None = None
        self._ipsets = _IPSets()
        self._policies: _Channel[PolicyID, Policy] = _Channel()
        self._profiles: _Channel[ProfileID, Profile] = _Channel()
        self._weps: _Channel[WorkloadEndpointID, WorkloadEndpoint] = _Channel()
        self._heps: _Channel[HostEndpointID, HostEndpoint] = _Channel()
        self._service_accounts: _Channel[ServiceAccountID, ServiceAccountUpdate] = _Channel()
        self._namespaces: _Channel[NamespaceID, NamespaceUpdate] = _Channel()
        self._routes: _Channel[str, RouteUpdate] = _Channel()
        self._vteps: _Channel[str, VXLANTunnelEndpointUpdate] = _Channel()
        self._wireguard: _Channel[str, WireguardEndpointUpdate] = _Channel()
        self._wireguard_v6: _Channel[str, WireguardEndpointV6Update] = _Channel()
        self._host_ips: _Channel[str, HostMetadataUpdate] = _Channel()  # v4-only legacy message
        self._hosts: _Channel[str, HostMetadataV4V6Update] = _Channel()
        self._pools: _Channel[str, IPAMPool] = _Channel()
        self._encap: _Latest[Encapsulation] = _Latest()
        self._bgp_config: _Latest[GlobalBGPConfigUpdate] = _Latest()
        self._services: _Channel[tuple[str, str], ServiceUpdate] = _Channel()
        self._channels: tuple[_Channel[Any, Any], ...] = (
            self._policies,
            self._profiles,
            self._weps,
            self._heps,
            self._service_accounts,
            self._namespaces,
            self._routes,
            self._vteps,
            self._wireguard,
            self._wireguard_v6,
            self._host_ips,
            self._hosts,
            self._pools,
            self._services,
        )

    # -- IP sets ---------------------------------------------------------------------------------

    def on_ipset_added(self, set_id: str, set_type: IPSetType) -> None:
        self._ipsets.add(set_id, set_type)

    def on_ipset_removed(self, set_id: str) -> None:
        self._ipsets.remove(set_id)

    def on_ipset_member_added(self, set_id: str, member: str) -> None:
        self._ipsets.member_change(set_id, member, add=True)

    def on_ipset_member_removed(self, set_id: str, member: str) -> None:
        self._ipsets.member_change(set_id, member, add=False)

    # -- rules -----------------------------------------------------------------------------------

    def on_policy_active(self, policy_id: PolicyID, policy: Policy) -> None:
        self._policies.update(policy_id, policy)

    def on_policy_inactive(self, policy_id: PolicyID) -> None:
        self._policies.remove(policy_id)

    def on_profile_active(self, profile_id: ProfileID, profile: Profile) -> None:
        self._profiles.update(profile_id, profile)

    def on_profile_inactive(self, profile_id: ProfileID) -> None:
        self._profiles.remove(profile_id)

    # -- endpoints -------------------------------------------------------------------------------

    def on_workload_endpoint_update(
        self, endpoint_id: WorkloadEndpointID, endpoint: WorkloadEndpoint | None
    ) -> None:
        if endpoint is None:
            self._weps.remove(endpoint_id)
        else:
            self._weps.update(endpoint_id, endpoint)

    def on_host_endpoint_update(
        self, endpoint_id: HostEndpointID, endpoint: HostEndpoint | None
    ) -> None:
        if endpoint is None:
            self._heps.remove(endpoint_id)
        else:
            self._heps.update(endpoint_id, endpoint)

    # -- config ----------------------------------------------------------------------------------

    def on_config_update(
        self,
        global_config: Mapping[str, str],
        selector_config: Mapping[str, str],
        host_config: Mapping[str, str],
    ) -> None:
        self._config_parts = (dict(global_config), dict(selector_config), dict(host_config))

    def on_datastore_not_ready(self) -> None:
        self._not_ready = True

    # -- pass-through and derived state ----------------------------------------------------------

    def on_host_metadata_update(self, update: HostMetadataV4V6Update) -> None:
        self._hosts.update(update.hostname, update)
        # Upstream also keeps the older v4-only message flowing for consumers that only want
        # the host's IPv4 address (no prefix length).
        if update.ipv4_addr:
            ip = update.ipv4_addr.split("/", 1)[0]
            self._host_ips.update(update.hostname, HostMetadataUpdate(update.hostname, ip))
        else:
            self._host_ips.remove(update.hostname)

    def on_host_metadata_remove(self, hostname: str) -> None:
        self._hosts.remove(hostname)
        self._host_ips.remove(hostname)

    def on_ip_pool_update(self, pool_id: str, pool: IPAMPool) -> None:
        self._pools.update(pool_id, pool)

    def on_ip_pool_remove(self, pool_id: str) -> None:
        self._pools.remove(pool_id)

    def on_service_account_update(self, sa_id: ServiceAccountID, labels: Mapping[str, str]) -> None:
        self._service_accounts.update(sa_id, ServiceAccountUpdate(sa_id, _sorted_labels(labels)))

    def on_service_account_remove(self, sa_id: ServiceAccountID) -> None:
        self._service_accounts.remove(sa_id)

    def on_namespace_update(self, ns_id: NamespaceID, labels: Mapping[str, str]) -> None:
        self._namespaces.update(ns_id, NamespaceUpdate(ns_id, _sorted_labels(labels)))

    def on_namespace_remove(self, ns_id: NamespaceID) -> None:
        self._namespaces.remove(ns_id)

    def on_wireguard_update(self, update: WireguardEndpointUpdate) -> None:
        if update.public_key:
            self._wireguard.update(update.hostname, update)
        else:  # upstream: an update without a key withdraws the endpoint
            self._wireguard.remove(update.hostname)

    def on_wireguard_remove(self, hostname: str) -> None:
        self._wireguard.remove(hostname)

    def on_wireguard_v6_update(self, update: WireguardEndpointV6Update) -> None:
        if update.public_key_v6:
            self._wireguard_v6.update(update.hostname, update)
        else:
            self._wireguard_v6.remove(update.hostname)

    def on_wireguard_v6_remove(self, hostname: str) -> None:
        self._wireguard_v6.remove(hostname)

    def on_global_bgp_config_update(self, update: GlobalBGPConfigUpdate) -> None:
        self._bgp_config.set(update)

    def on_service_update(self, update: ServiceUpdate) -> None:
        self._services.update((update.namespace, update.name), update)

    def on_service_remove(self, name: str, namespace: str) -> None:
        self._services.remove((namespace, name))

    def on_encap_update(self, encap: Encapsulation) -> None:
        self._encap.set(encap)

    def on_route_update(self, update: RouteUpdate) -> None:
        self._routes.update(update.dst, update)

    def on_route_remove(self, dst: str) -> None:
        self._routes.remove(dst)

    def on_vtep_update(self, update: VXLANTunnelEndpointUpdate) -> None:
        self._vteps.update(update.node, update)

    def on_vtep_remove(self, node: str) -> None:
        self._vteps.remove(node)

    # -- flushing --------------------------------------------------------------------------------

    def pending(self) -> bool:
        """True if ``flush()`` would (or may, for config) emit something."""
        return (
            self._not_ready
            or self._config_parts is not None
            or self._ipsets.pending()
            or any(ch.pending() for ch in self._channels)
            or self._encap.pending is not None
            or self._bgp_config.pending is not None
        )

    def flush(self) -> int:
        """Emit everything pending as one ordered batch; returns its length (0: sink not called)."""
        out: list[ToDataplane] = []
        # 1-2: readiness and config first: they may make the dataplane restart or wait.
        if self._not_ready:
            self._not_ready = False
            out.append(DatastoreNotReady())
        self._flush_config(out)
        # 3-7: creations and updates, leaves of the dependency tree first.
        out.extend(self._ipsets.take_added())
        out.extend(self._ipsets.take_deltas())
        out.extend(ActivePolicyUpdate(k, v) for k, v in self._policies.take_updates())
        out.extend(ActiveProfileUpdate(k, v) for k, v in self._profiles.take_updates())
        out.extend(WorkloadEndpointUpdate(k, v) for k, v in self._weps.take_updates())
        out.extend(HostEndpointUpdate(k, v) for k, v in self._heps.take_updates())
        # 8-11: deletions, users before what they use.
        out.extend(WorkloadEndpointRemove(k) for k in self._weps.take_deletes())
        out.extend(HostEndpointRemove(k) for k in self._heps.take_deletes())
        out.extend(ActiveProfileRemove(k) for k in self._profiles.take_deletes())
        out.extend(ActivePolicyRemove(k) for k in self._policies.take_deletes())
        out.extend(self._ipsets.take_removed())
        # 12-13: removes then updates.
        self._flush_removes_then_updates(out, self._service_accounts, ServiceAccountRemove)
        self._flush_removes_then_updates(out, self._namespaces, NamespaceRemove)
        # 14-17: routes are withdrawn before their VTEPs and added after them.
        out.extend(RouteRemove(k) for k in self._routes.take_deletes())
        out.extend(VXLANTunnelEndpointRemove(k) for k in self._vteps.take_deletes())
        out.extend(v for _, v in self._vteps.take_updates())
        out.extend(v for _, v in self._routes.take_updates())
        # 18-19: wireguard deletes, then updates (v4 then v6 within each step).
        out.extend(WireguardEndpointRemove(k) for k in self._wireguard.take_deletes())
        out.extend(WireguardEndpointV6Remove(k) for k in self._wireguard_v6.take_deletes())
        out.extend(v for _, v in self._wireguard.take_updates())
        out.extend(v for _, v in self._wireguard_v6.take_updates())
        # 20-21: host metadata deletes then updates (legacy v4-only message before v4v6).
        out.extend(HostMetadataRemove(k) for k in self._host_ips.take_deletes())
        out.extend(HostMetadataV4V6Remove(k) for k in self._hosts.take_deletes())
        out.extend(v for _, v in self._host_ips.take_updates())
        out.extend(v for _, v in self._hosts.take_updates())
        # 22-23: IP pools.
        out.extend(IPAMPoolRemove(k) for k in self._pools.take_deletes())
        out.extend(IPAMPoolUpdate(k, v) for k, v in self._pools.take_updates())
        # 24-26: encapsulation, global BGP config, services.
        self._append_if(out, self._encap.take())
        self._append_if(out, self._bgp_config.take())
        out.extend(ServiceRemove(name=n, namespace=ns) for ns, n in self._services.take_deletes())
        out.extend(v for _, v in self._services.take_updates())
        if out:
            self._sink(out)
        return len(out)

    @staticmethod
    def _append_if(out: list[ToDataplane], msg: ToDataplane | None) -> None:
        if msg is not None:
            out.append(msg)

    @staticmethod
    def _flush_removes_then_updates(
        out: list[ToDataplane], channel: _Channel[Any, Any], remove: Callable[[Any], ToDataplane]
    ) -> None:
        out.extend(remove(k) for k in channel.take_deletes())
        out.extend(v for _, v in channel.take_updates())

    def _flush_config(self, out: list[ToDataplane]) -> None:
        if self._config_parts is None:
            return
        merged: dict[str, str] = {}
        for part in self._config_parts:  # global, then selector-scoped, then this host
            merged.update(part)
        self._config_parts = None
        if merged != self._sent_config:
            self._sent_config = merged
            out.append(ConfigUpdate(config=dict(merged)))


__all__ = ["EventSequencer", "SequencerError", "Sink"]
