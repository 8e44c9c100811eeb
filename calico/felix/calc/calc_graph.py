"""The calculation graph: typed syncer updates in, PipelineCallbacks calls out
(design/felix-calc.md).

Wiring (upstream felix/calc/calc_graph.go)::

    Update(Key, value) ─▶ ValidationFilter ─▶ all-updates TypeFanout
      ├─ WEP/HEP ─▶ split by hostname ─▶ local fan-out ─▶ ActiveRulesCalculator, PolicyResolver
      │                               └▶ remote fan-out (no consumers: lookup caches only)
      ├─ WEP/HEP/NetworkSet ─▶ [endpoint_listener] (flow collector: names, labels, all hosts)
      ├─ WEP/HEP/NetworkSet/ProfileLabels ─▶ IP set index (all hosts: members are cluster-wide)
      ├─ Policy/ProfileRules/ProfileLabels ─▶ ARC ─▶ RuleScanner ─▶ callbacks (+ IP set index)
      ├─ Policy/Tier ─▶ PolicyResolver ◀─ matches from the ARC
      ├─ WEP/Node ─▶ [StatsCollector] (cluster counts for the metrics)
      ├─ BGPPeer/this Node + local WEPs ─▶ LocalBGPPeerCalculator ─▶ PolicyResolver
      └─ ResourceKey, config, pools, ... ─▶ ProfileDecoder, ConfigBatcher, EncapsulationResolver,
                                            DataplanePassthru, [VXLANResolver], [L3RouteResolver]
                                            (L3RouteResolver also takes local WEPs)

``CalcGraph.flush()`` is the PolicyResolver's flush (the only node that batches).
:class:`CalcPipeline` adds the EventSequencer and the one-shot InSync; AsyncCalcGraph runs a
pipeline on its own thread.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, Literal

from calico.felix.calc.active_rules import ActiveRulesCalculator
from calico.felix.calc.async_calc_graph import AsyncCalcGraph
from calico.felix.calc.callbacks import PipelineCallbacks
from calico.felix.calc.config_batcher import ConfigBatcher
from calico.felix.calc.dataplane_passthru import DataplanePassthru
from calico.felix.calc.encap_resolver import EncapsulationResolver
from calico.felix.calc.event_sequencer import EventSequencer
from calico.felix.calc.fanout import TypeFanout
from calico.felix.calc.l3_route_resolver import L3RouteResolver
from calico.felix.calc.local_bgp_peers import LocalBGPPeerCalculator
from calico.felix.calc.pipeline import CalcPipeline
from calico.felix.calc.policy_resolver import PolicyResolver
from calico.felix.calc.profile_decoder import ProfileDecoder
from calico.felix.calc.rule_scanner import RuleScanner
from calico.felix.calc.service_index import ServiceIndex
from calico.felix.calc.stats_collector import StatsCollector, StatsSink
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
from calico.felix.messages import PolicyPrepare, ToDataplane
from calico.model import (
    HostEndpointKey,
    NetworkSetKey,
    PolicyKey,
    ProfileLabelsKey,
    ProfileRulesKey,
    ResourceKey,
    TierKey,
    WorkloadEndpointKey,
)
from calico.model import values as v1
from calico.syncer.api import SyncStatus, Update

IndexKind = Literal["indexed", "linear"]
IPSetMember = v1.WorkloadEndpoint | v1.HostEndpoint | v1.NetworkSet


def named_ports(value: IPSetMember) -> tuple[NamedPort, ...]:
    """An endpoint's named ports (unnamed HEP ports cannot be referenced by rules)."""
    if isinstance(value, v1.NetworkSet):
        return ()
    return tuple(_named_port(p.name, str(p.protocol or ""), p.port) for p in value.ports if p.name)


@lru_cache(maxsize=4096, typed=True)
def _named_port(name: str, protocol: str, port: int) -> NamedPort:
    """One shared (immutable) NamedPort per distinct port: a frozen dataclass's ``__init__`` is
    Python code, and a snapshot's endpoints repeat a handful of ports. ``typed`` keeps the
    cache from answering a ``True`` port with a ``1`` one."""
    return NamedPort(name, protocol, port)


def endpoint_nets(value: IPSetMember) -> tuple[str, ...]:
    """The addresses an endpoint or network set contributes to selector IP sets (an
    endpoint's as :func:`host_cidrs` members, a network set's as given)."""
    if isinstance(value, v1.WorkloadEndpoint):
        v4, v6 = value.ipv4_nets, value.ipv6_nets
        return host_cidrs([*v4, *v6] if v6 else v4)
    if isinstance(value, v1.HostEndpoint):
        return host_cidrs([*value.expected_ipv4_addrs, *value.expected_ipv6_addrs])
    return value.nets


class IPSetMemberFeed:
    """Adapts v1 endpoint / network-set / profile-label updates to the IP set index."""

    def __init__(self, index: Any) -> None:
        self._index = index

    def on_item(self, key: Any, value: IPSetMember | None) -> None:
        if value is None:
            self._index.delete_endpoint_or_set(key)
            return
        self._index.update_endpoint_or_set(
            key,
            value.labels,
            endpoint_nets(value),
            named_ports(value),
            value.profile_ids,
            # host_cidrs' output is members already; a network set's CIDRs are not
            nets_normalised=not isinstance(value, v1.NetworkSet),
        )

    def on_profile_labels(self, key: ProfileLabelsKey, value: v1.ProfileLabels | None) -> None:
        if value is None:
            self._index.delete_parent_labels(key.name)
        else:
            self._index.update_parent_labels(key.name, value.labels)


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
        stats: StatsSink | None = None,
        endpoint_listener: Callable[[Any, Any], None] | None = None,
    ) -> None:
        self.hostname = hostname
        selector_index_cls, ipset_index_cls = _index_classes(index)
        self.all_updates = TypeFanout()
        self.local_endpoints = TypeFanout()
        self.remote_endpoints = TypeFanout()
        self._filter = ValidationFilter(
            self.all_updates.on_update, workload_source_spoofing=workload_source_spoofing
        )
        for key_type in (WorkloadEndpointKey, HostEndpointKey):
            self.all_updates.register(key_type, self._split_endpoint)
        if endpoint_listener is not None:
            for key_type in (WorkloadEndpointKey, HostEndpointKey, NetworkSetKey):
                self.all_updates.register(key_type, endpoint_listener)

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

        # Service IP sets (rules with ``services:``) from EndpointSlices.
        self.service_index = ServiceIndex(
            callbacks.on_ipset_member_added, callbacks.on_ipset_member_removed
        )
        self.all_updates.register(ResourceKey, self.service_index.on_resource)

        # Active rules -> rule scanner -> callbacks and the IP set indexes.
        self.rule_scanner = RuleScanner(callbacks, self.ipset_index, self.service_index)
        self.active_rules = ActiveRulesCalculator(self.rule_scanner, selector_index_cls)
        self.active_rules.add_match_listener(self.policy_resolver)
        self.all_updates.register(PolicyKey, self.active_rules.on_policy)
        self.all_updates.register(
            ProfileRulesKey, lambda k, v: self.active_rules.on_profile_rules(k.name, v)
        )
        self.all_updates.register(
            ProfileLabelsKey,
            lambda k, v: self.active_rules.on_profile_labels(k.name, v and v.labels),
        )
        for key_type in (WorkloadEndpointKey, HostEndpointKey):
            self.local_endpoints.register(key_type, self.active_rules.on_endpoint)
            self.local_endpoints.register(key_type, self.policy_resolver.on_endpoint)
        # After the resolver: a new endpoint is known there before its BGP peer name arrives.
        self.local_bgp_peers = LocalBGPPeerCalculator(
            hostname, self.policy_resolver.on_endpoint_bgp_peer
        )
        self.local_bgp_peers.register(self.all_updates, self.local_endpoints)

        self._register_helper_nodes(
            callbacks, ipip_enabled, vxlan_enabled, enable_vxlan_resolver, route_source
        )
        if stats is not None:
            StatsCollector(stats).register(self.all_updates)

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
        """Called for each syncer update (typed key and value)."""
        self._filter.on_update(update.key, update.value)

    def on_status(self, status: SyncStatus) -> None:
        self.all_updates.on_status(status)
        self.local_endpoints.on_status(status)
        self.remote_endpoints.on_status(status)

    def flush(self) -> None:
        """Called before the sequencer's flush: emits the batched endpoint updates."""
        self.policy_resolver.flush()

    # -- preparation (design/felix-calc.md "Preparing inactive policies") --------------------

    @property
    def wants_prepare(self) -> bool:
        """Inactive policies wait to be prepared and the RuleScanner's cache has room."""
        return self.active_rules.has_unprepared and self.rule_scanner.prepare_room > 0

    def prepare_policies(self, limit: int) -> list[ToDataplane]:
        """Parse up to ``limit`` inactive policies into the RuleScanner's cache; the messages
        that let the dataplane render them too. Nothing active changes."""
        out: list[ToDataplane] = []
        taken = self.active_rules.take_unprepared(min(limit, self.rule_scanner.prepare_room))
        for key, value in taken:
            prepared = self.rule_scanner.prepare(key, value)
            if prepared is not None:
                out.append(PolicyPrepare(*prepared))
        return out

    # -- internals ------------------------------------------------------------------------------

    def _split_endpoint(self, key: WorkloadEndpointKey | HostEndpointKey, value: Any) -> None:
        if key.hostname == self.hostname:
            self.local_endpoints.on_update(key, value)
        else:
            self.remote_endpoints.on_update(key, value)


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
    SyncerCallbacks, or the :class:`CalcPipeline` itself when ``synchronous`` (the caller
    decides when to flush: tests, benchmarks)."""
    sequencer = EventSequencer(sink)
    graph = CalcGraph(hostname, sequencer, index=index, **graph_options)
    pipeline = CalcPipeline(graph, sequencer, sink)
    if synchronous:
        return pipeline
    return AsyncCalcGraph(pipeline, health)
