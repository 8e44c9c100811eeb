"""The calculation graph: syncer updates in, PipelineCallbacks calls out (design/felix-calc.md).

Wiring (upstream felix/calc/calc_graph.go)::

    Update ─▶ key_from_default_path ─▶ ValidationFilter ─▶ all-updates Dispatcher
      ├─ WEP/HEP ─▶ split by hostname ─▶ local Dispatcher ─▶ ActiveRulesCalculator, PolicyResolver
      │                               └▶ remote Dispatcher (no consumers: lookup caches only)
      ├─ WEP/HEP/NetworkSet/ProfileLabels ─▶ IP set index (all hosts: members are cluster-wide)
      ├─ Policy/ProfileRules/ProfileLabels ─▶ ARC ─▶ RuleScanner ─▶ callbacks (+ IP set index)
      ├─ Policy/Tier ─▶ PolicyResolver ◀─ matches from the ARC
      └─ ResourceKey, config, pools, ... ─▶ ProfileDecoder, ConfigBatcher, EncapsulationResolver,
                                            DataplanePassthru, [VXLANResolver], [L3RouteResolver]
                                            (L3RouteResolver also takes local WEPs)

``flush()`` is the PolicyResolver's flush (the only node that batches); the EventSequencer is
flushed after it by the driver (AsyncCalcGraph or :class:`SyncCalcPipeline`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal

from calico.felix.calc.active_rules import ActiveRulesCalculator
from calico.felix.calc.async_calc_graph import AsyncCalcGraph
from calico.felix.calc.callbacks import PipelineCallbacks
from calico.felix.calc.config_batcher import ConfigBatcher
from calico.felix.calc.dataplane_passthru import DataplanePassthru
from calico.felix.calc.dispatcher import Dispatcher
from calico.felix.calc.encap_resolver import EncapsulationResolver
from calico.felix.calc.event_sequencer import EventSequencer
from calico.felix.calc.l3_route_resolver import L3RouteResolver
from calico.felix.calc.policy_resolver import PolicyResolver
from calico.felix.calc.profile_decoder import ProfileDecoder
from calico.felix.calc.rule_scanner import RuleScanner
from calico.felix.calc.validation_filter import ValidationFilter
from calico.felix.calc.vxlan_resolver import VXLANResolver
from calico.felix.labelindex import (
    LinearSelectorAndNamedPortIndex,
    LinearSelectorIndex,
    NamedPort,
    SelectorAndNamedPortIndex,
    SelectorIndex,
    host_cidrs,
)
from calico.felix.messages import InSync, ToDataplane
from calico.model import (
    HostEndpointKey,
    NetworkSetKey,
    PolicyKey,
    ProfileLabelsKey,
    ProfileRulesKey,
    TierKey,
    WorkloadEndpointKey,
    key_from_default_path,
)
from calico.model.escaping import InvalidKeyError
from calico.syncer.api import SyncStatus, Update

log = logging.getLogger(__name__)

IndexKind = Literal["indexed", "linear"]


def named_ports(value: Mapping[str, Any]) -> tuple[NamedPort, ...]:
    """An endpoint's named ports (unnamed HEP ports cannot be referenced by rules)."""
    return tuple(
        NamedPort(p["name"], str(p.get("protocol") or ""), int(p["port"]))
        for p in value.get("ports") or ()
        if p.get("name")
    )


def endpoint_nets(key: Any, value: Mapping[str, Any]) -> tuple[str, ...]:
    """The addresses an endpoint or network set contributes to selector IP sets."""
    if isinstance(key, WorkloadEndpointKey):
        return host_cidrs([*(value.get("ipv4_nets") or ()), *(value.get("ipv6_nets") or ())])
    if isinstance(key, HostEndpointKey):
        return host_cidrs(
            [*(value.get("expected_ipv4_addrs") or ()), *(value.get("expected_ipv6_addrs") or ())]
        )
    return tuple(value.get("nets") or ())


class IPSetMemberFeed:
    """Adapts v1 endpoint / network-set / profile-label updates to the IP set index."""

    def __init__(self, index: Any) -> None:
        self._index = index

    def on_item(self, key: Any, value: Mapping[str, Any] | None) -> None:
        if value is None:
            self._index.delete_endpoint_or_set(key)
            return
        self._index.update_endpoint_or_set(
            key,
            dict(value.get("labels") or {}),
            endpoint_nets(key, value),
            named_ports(value),
            tuple(value.get("profile_ids") or ()),
        )

    def on_profile_labels(self, key: ProfileLabelsKey, value: Mapping[str, str] | None) -> None:
        if value is None:
            self._index.delete_parent_labels(key.name)
        else:
            self._index.update_parent_labels(key.name, value)


def _index_classes(index: IndexKind) -> tuple[type, type]:
    if index == "indexed":
        return SelectorIndex, SelectorAndNamedPortIndex
    if index == "linear":
        return LinearSelectorIndex, LinearSelectorAndNamedPortIndex
    raise ValueError(f"unknown index kind {index!r}")


class CalcGraph:
    """Builds and owns every node; single-threaded (see AsyncCalcGraph)."""

    def __init__(
        self,
        hostname: str,
        callbacks: PipelineCallbacks,
        *,
        index: IndexKind = "indexed",
        workload_source_spoofing: str = "Disabled",
        ipip_enabled: bool | None = None,
        vxlan_enabled: bool | None = None,
        enable_vxlan_resolver: bool = False,
        route_source: str | None = None,
    ) -> None:
        self.hostname = hostname
        selector_index_cls, ipset_index_cls = _index_classes(index)
        self.all_updates = Dispatcher()
        self.local_endpoints = Dispatcher()
        self.remote_endpoints = Dispatcher()
        self._filter = ValidationFilter(
            self.all_updates.on_update, workload_source_spoofing=workload_source_spoofing
        )
        for key_type in (WorkloadEndpointKey, HostEndpointKey):
            self.all_updates.register(key_type, self._split_endpoint)

        # IP set membership (all hosts' endpoints and every network set).
        self.ipset_index = ipset_index_cls(
            callbacks.on_ipset_member_added, callbacks.on_ipset_member_removed
        )
        feed = IPSetMemberFeed(self.ipset_index)
        for key_type in (WorkloadEndpointKey, HostEndpointKey, NetworkSetKey):
            self.all_updates.register(key_type, feed.on_item)
        self.all_updates.register(ProfileLabelsKey, feed.on_profile_labels)

        # Policy ordering first, so the resolver knows a policy before its matches arrive.
        self.policy_resolver = PolicyResolver(callbacks)
        self.all_updates.register(PolicyKey, self.policy_resolver.on_policy)
        self.all_updates.register(TierKey, self.policy_resolver.on_tier)
        self.all_updates.register_status_handler(self.policy_resolver.on_status)

        # Active rules -> rule scanner -> callbacks and the IP set index.
        self.rule_scanner = RuleScanner(callbacks, self.ipset_index)
        self.active_rules = ActiveRulesCalculator(self.rule_scanner, selector_index_cls)
        self.active_rules.add_match_listener(self.policy_resolver)
        self.all_updates.register(PolicyKey, self.active_rules.on_policy)
        self.all_updates.register(
            ProfileRulesKey, lambda k, v: self.active_rules.on_profile_rules(k.name, v)
        )
        self.all_updates.register(
            ProfileLabelsKey, lambda k, v: self.active_rules.on_profile_labels(k.name, v)
        )
        for key_type in (WorkloadEndpointKey, HostEndpointKey):
            self.local_endpoints.register(key_type, self.active_rules.on_endpoint)
            self.local_endpoints.register(key_type, self.policy_resolver.on_endpoint)

        self._register_helper_nodes(
            callbacks, ipip_enabled, vxlan_enabled, enable_vxlan_resolver, route_source
        )

    def _register_helper_nodes(
        self,
        callbacks: PipelineCallbacks,
        ipip_enabled: bool | None,
        vxlan_enabled: bool | None,
        enable_vxlan_resolver: bool,
        route_source: str | None,
    ) -> None:
        """The pass-through / config / encapsulation nodes (calico.felix.calc siblings).
        The VXLAN and route resolvers are optional, as upstream (only with VXLAN, or when
        Felix programs routes: ``route_source`` "CalicoIPAM" or "WorkloadIPs")."""
        ProfileDecoder(callbacks).register(self.all_updates)
        ConfigBatcher(callbacks, self.hostname).register(self.all_updates)
        EncapsulationResolver(
            callbacks, ipip_enabled=ipip_enabled, vxlan_enabled=vxlan_enabled
        ).register(self.all_updates)
        DataplanePassthru(callbacks, self.hostname).register(self.all_updates)
        if enable_vxlan_resolver:
            VXLANResolver(callbacks, self.hostname).register(self.all_updates)
        if route_source is not None:
            L3RouteResolver(callbacks, self.hostname, route_source).register(
                self.all_updates, self.local_endpoints
            )

    # -- input --------------------------------------------------------------------------------

    def on_update(self, update: Update) -> None:
        """Called for each syncer update; unknown or unparsable key paths are ignored."""
        try:
            key = key_from_default_path(update.key)
        except (InvalidKeyError, ValueError):
            key = None
        if key is None:
            log.debug("Ignoring update for unknown key %r", update.key)
            return
        self._filter.on_update(key, update.value)

    def on_key_update(self, key: Any, value: Any) -> None:
        """As :meth:`on_update` for an already-parsed key (tests, benchmarks)."""
        self._filter.on_update(key, value)

    def on_status(self, status: SyncStatus) -> None:
        self.all_updates.on_status(status)
        self.local_endpoints.on_status(status)
        self.remote_endpoints.on_status(status)

    def flush(self) -> None:
        """Called before the sequencer's flush: emits the batched endpoint updates."""
        self.policy_resolver.flush()

    # -- internals ------------------------------------------------------------------------------

    def _split_endpoint(self, key: WorkloadEndpointKey | HostEndpointKey, value: Any) -> None:
        if key.hostname == self.hostname:
            self.local_endpoints.on_update(key, value)
        else:
            self.remote_endpoints.on_update(key, value)


class SyncCalcPipeline:
    """A synchronous driver with AsyncCalcGraph's contract, for tests and benchmarks: the
    caller decides when to ``flush()``; ``InSync`` follows the first flush after in-sync."""

    def __init__(self, graph: CalcGraph, sequencer: Any, sink: Callable[[list[Any]], None]):
        self.graph = graph
        self.sequencer = sequencer
        self._sink = sink
        self._been_in_sync = False
        self._sent_in_sync = False

    def on_updates(self, updates: list[Update]) -> None:
        for update in updates:
            self.graph.on_update(update)

    def on_status_updated(self, status: SyncStatus) -> None:
        self.graph.on_status(status)
        if status is SyncStatus.IN_SYNC:
            self._been_in_sync = True

    def flush(self) -> None:
        self.graph.flush()
        self.sequencer.flush()
        if self._been_in_sync and not self._sent_in_sync:
            self._sent_in_sync = True
            self._sink([InSync()])


def build_felix_calc_pipeline(
    hostname: str,
    sink: Callable[[list[ToDataplane]], None],
    health: Any = None,
    index: IndexKind = "indexed",
    *,
    synchronous: bool = False,
    **graph_options: Any,
) -> Any:
    """Graph + EventSequencer + driver. Returns an (unstarted) ``AsyncCalcGraph`` implementing
    SyncerCallbacks, or a :class:`SyncCalcPipeline` when ``synchronous``."""
    sequencer = EventSequencer(sink)
    graph = CalcGraph(hostname, sequencer, index=index, **graph_options)
    if synchronous:
        return SyncCalcPipeline(graph, sequencer, sink)
    return AsyncCalcGraph(graph, sequencer, sink, health)
