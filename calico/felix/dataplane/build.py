"""Assemble the dataplane (table, managers, route table, monitors) from resolved Felix config.

Kept apart from the loop so the loop can be unit-tested with fakes and the daemon stays a thin
wiring layer.
"""

from __future__ import annotations

import logging
from typing import Any

from calico.felix.config import Config
from calico.felix.dataplane import conntrack, sysctls
from calico.felix.dataplane.endpoint_status import EndpointStatusFileReporter, EndpointStatusFiles
from calico.felix.dataplane.loop import DataplaneParts, InternalDataplane
from calico.felix.dataplane.managers.endpoints import EndpointManager
from calico.felix.dataplane.managers.hosts import HostsIPSetManager
from calico.felix.dataplane.managers.iface_config import WorkloadIfaceConfigurator
from calico.felix.dataplane.managers.ipsets import IPSetsManager
from calico.felix.dataplane.managers.masq import MasqManager
from calico.felix.dataplane.managers.policy import PolicyManager
from calico.felix.dataplane.metrics import FelixMetrics
from calico.felix.nftables.table import NftablesTable
from calico.felix.rules import RenderConfig, RuleRenderer
from calico.health import HealthAggregator

log = logging.getLogger(__name__)

_UNSUPPORTED = ("BPFEnabled", "WireguardEnabled", "WireguardEnabledV6")


def build_parts(config: Config, *, nft: Any = None, route_table: Any = None) -> DataplaneParts:
    """Every manager wired to one ``inet calico`` table. ``nft``/``route_table`` are for tests."""
    for name in _UNSUPPORTED:
        if config[name]:
            log.warning("%s is set but not supported by this dataplane; ignoring it", name)
    renderer = RuleRenderer(RenderConfig.from_config(config))
    versions = renderer.config.ip_versions
    table = NftablesTable(nft=nft, refresh_interval=config.nftables_refresh_interval)
    for chain in renderer.static_chains():
        table.set_chain(chain)
    if route_table is None:
        from calico.felix.routetable import RouteTable

        route_table = RouteTable(
            iface_prefixes=renderer.config.workload_iface_prefixes,
            ip_versions=versions,
            device_route_protocol=config.device_route_protocol,
            metric=config.ipv4_normal_route_priority,
            refresh_interval=config.route_refresh_interval,
            remove_external_routes=config.remove_external_routes,
        )
    ipv6 = 6 in versions
    ifaces = WorkloadIfaceConfigurator(ipv6_enabled=ipv6)
    ipsets = IPSetsManager(table, versions)
    policies = PolicyManager(table, renderer)
    endpoints = EndpointManager(
        table, renderer, policies, route_table, ifaces, ip_versions=versions
    )
    masq = MasqManager(table, versions)
    hosts = HostsIPSetManager(table, versions)
    status = EndpointStatusFileReporter(EndpointStatusFiles(config.endpoint_status_path_prefix))
    return DataplaneParts(
        table=table,
        ipsets=ipsets,
        policies=policies,
        endpoints=endpoints,
        # Deferred work runs in this order: endpoints declare the profiles they jump to before
        # the policy manager creates (empty) chains for the ones the datastore lacks.
        managers=[ipsets, masq, hosts, endpoints, policies],
        route_table=route_table,
        ifaces=ifaces,
        status=status,
        flush_conntrack=lambda ips: conntrack.flush_ips(ips),
        iface_listeners=[route_table, endpoints, hosts],
    )


def configure_host(config: Config) -> None:
    """Host-wide sysctls (forwarding, conntrack accounting); failures are logged, not fatal."""
    ipv6 = bool(config.ipv6_support)
    errors = sysctls.configure_global(ip_forwarding=config.ip_forwarding == "Enabled", ipv6=ipv6)
    for err in errors:
        log.warning("Failed to set global sysctl %s=%s: %s", err.path, err.value, err.error)


def build_internal_dataplane(
    config: Config,
    *,
    health: HealthAggregator | None,
    metrics: FelixMetrics | None,
    on_in_sync: Any = None,
) -> InternalDataplane:
    from calico.felix.ifacemonitor import InterfaceMonitor

    parts = build_parts(config)
    configure_host(config)
    dataplane: InternalDataplane | None = None

    def state(name: str, st: str, index: int) -> None:
        assert dataplane is not None
        dataplane.on_iface_state(name, st, index)

    def addrs(name: str, a: set[str] | None) -> None:
        assert dataplane is not None
        dataplane.on_iface_addrs(name, a)

    def in_sync() -> None:
        assert dataplane is not None
        dataplane.on_ifaces_in_sync()

    monitor = InterfaceMonitor(
        state, addrs, on_in_sync=in_sync, resync_interval=config.interface_refresh_interval
    )
    dataplane = InternalDataplane(
        parts,
        health=health,
        metrics=metrics,
        on_in_sync=on_in_sync,
        health_timeout=config.dataplane_watchdog_timeout,
        iface_monitor=monitor,
    )
    return dataplane
