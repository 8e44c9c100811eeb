"""Assemble the dataplane (table, managers, route table, monitors) from resolved Felix config.

Kept apart from the loop so the loop can be unit-tested with fakes and the daemon stays a thin
wiring layer.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from calico.felix.config import Config
from calico.felix.dataplane import conntrack, sysctls
from calico.felix.dataplane.encap_support import TunnelSupportReporter
from calico.felix.dataplane.endpoint_status import EndpointStatusFileReporter, EndpointStatusFiles
from calico.felix.dataplane.loop import DataplaneParts, InternalDataplane
from calico.felix.dataplane.managers.endpoints import EndpointManager
from calico.felix.dataplane.managers.hosts import HostsIPSetManager
from calico.felix.dataplane.managers.iface_config import WorkloadIfaceConfigurator
from calico.felix.dataplane.managers.ipsets import IPSetsManager
from calico.felix.dataplane.managers.masq import MasqManager
from calico.felix.dataplane.managers.policy import PolicyManager
from calico.felix.dataplane.managers.vxlan import VXLANManager
from calico.felix.dataplane.mtu import (
    DEFAULT_HOST_MTU,
    LinkMTU,
    MTUs,
    encap_mtus,
    find_host_mtu,
    write_mtu_file,
)
from calico.felix.dataplane.vxlan_kernel import KernelError, VXLANKernel
from calico.felix.dataplane.vxlan_model import DEVICE_NAMES, Settings
from calico.felix.messages import Encapsulation
from calico.felix.nftables.table import NftablesTable
from calico.felix.rules import RenderConfig, RuleRenderer
from calico.health import HealthAggregator

if TYPE_CHECKING:  # prometheus_client is imported only when metrics are on
    from calico.felix.dataplane.metrics import FelixMetrics

log = logging.getLogger(__name__)

_UNSUPPORTED: tuple[str, ...] = ()


class DataplaneStartError(RuntimeError):
    """The dataplane cannot be built (Felix exits 1 with this one-line reason)."""


def build_vxlan_managers(
    config: Config,
    encap: Encapsulation,
    mtus: MTUs,
    *,
    netns: str | None = None,
    table: NftablesTable | None = None,
) -> list[VXLANManager]:
    """One manager per family whose VXLAN is on (v6 also needs Ipv6Support), as upstream:
    the set is fixed at start-up and an Encapsulation change restarts Felix."""
    out = []
    for version, on, mtu in (
        (4, encap.vxlan_enabled, mtus.vxlan),
        (6, encap.vxlan_enabled_v6 and bool(config.ipv6_support), mtus.vxlan_v6),
    ):
        if not on:
            continue
        settings = Settings(
            version=version,
            hostname=config.felix_hostname,
            vni=config.vxlan_vni,
            port=config.vxlan_port,
            mtu=mtu,
            device_route_protocol=config.device_route_protocol,
        )
        out.append(
            VXLANManager(
                settings,
                VXLANKernel(version, netns=netns),
                refresh_interval=config.route_refresh_interval,
                table=table,
                external_nodes=tuple(str(c) for c in config.external_nodes_cidr_list or ()),
            )
        )
    return out


def remove_unused_vxlan_devices(
    config: Config, encap: Encapsulation, *, netns: str | None = None
) -> None:
    """A family's VXLAN off at start-up: delete its device if a previous run left it."""
    for version, on in ((4, encap.vxlan_enabled), (6, encap.vxlan_enabled_v6)):
        if on or (version == 6 and not config.ipv6_support):
            continue
        kernel = VXLANKernel(version, netns=netns)
        try:
            if kernel.delete_device(DEVICE_NAMES[version]):
                log.info("VXLAN (IPv%d) is off: removed %s", version, DEVICE_NAMES[version])
        except KernelError as e:
            log.warning("Could not remove unused %s: %s", DEVICE_NAMES[version], e)
        finally:
            kernel.close()


def build_parts(
    config: Config,
    *,
    nft: Any = None,
    route_table: Any = None,
    encap: Encapsulation | None = None,
    mtus: MTUs | None = None,
    vxlan_managers: list[VXLANManager] | None = None,
    tunnel_probe: Any = None,
) -> DataplaneParts:
    """Every manager wired to one ``inet calico`` table. ``nft``/``route_table``/
    ``vxlan_managers``/``tunnel_probe`` are for tests."""
    for name in _UNSUPPORTED:
        if config[name]:
            log.warning("%s is set but not supported by this dataplane; ignoring it", name)
    encap = encap or Encapsulation()
    mtus = mtus or encap_mtus(DEFAULT_HOST_MTU)
    tunnels = TunnelSupportReporter(
        wireguard_v4=bool(config.wireguard_enabled),
        wireguard_v6=bool(config.wireguard_enabled_v6),
        **({"probe": tunnel_probe} if tunnel_probe is not None else {}),
    )
    table = NftablesTable(nft=nft, refresh_interval=config.nftables_refresh_interval)
    if vxlan_managers is None:
        vxlan_managers = build_vxlan_managers(config, encap, mtus, table=table)
    render = RenderConfig.from_config(config)
    render = dataclasses.replace(
        render, vxlan_versions=tuple(m.settings.version for m in vxlan_managers)
    )
    renderer = RuleRenderer(render)
    versions = renderer.config.ip_versions
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
        managers=[ipsets, masq, hosts, endpoints, policies, tunnels, *vxlan_managers],
        route_table=route_table,
        host_appliers=list(vxlan_managers),
        ifaces=ifaces,
        status=status,
        flush_conntrack=lambda ips: conntrack.flush_ips(ips),
        iface_listeners=[route_table, endpoints, hosts, *vxlan_managers],
    )


def configure_host(config: Config) -> None:
    """Host-wide sysctls (forwarding, conntrack accounting); failures are logged, not fatal."""
    ipv6 = bool(config.ipv6_support)
    errors = sysctls.configure_global(ip_forwarding=config.ip_forwarding == "Enabled", ipv6=ipv6)
    for err in errors:
        log.warning("Failed to set global sysctl %s=%s: %s", err.path, err.value, err.error)


def detect_mtus(config: Config, encap: Encapsulation) -> tuple[MTUs, int]:
    """(tunnel MTUs, pod MTU) from this namespace's links and the config."""
    kernel = VXLANKernel(4)
    try:
        links = [LinkMTU(lk.name, lk.mtu, lk.oper_up) for lk in kernel.links()]
    except KernelError as e:
        raise DataplaneStartError(f"cannot list links to detect the host MTU: {e}") from e
    finally:
        kernel.close()
    host = find_host_mtu(links, config.mtu_iface_pattern)
    mtus = encap_mtus(
        host,
        ipip=config.ip_in_ip_mtu,
        vxlan=config.vxlan_mtu,
        vxlan_v6=config.vxlan_mtuv6,
        wireguard=config.wireguard_mtu,
        wireguard_v6=config.wireguard_mtuv6,
    )
    pod = mtus.pod_mtu(
        ipip=encap.ipip_enabled, vxlan=encap.vxlan_enabled, vxlan_v6=encap.vxlan_enabled_v6
    )
    return mtus, pod


def publish_mtu(config: Config, encap: Encapsulation) -> MTUs:
    """Detect MTUs and write the pod MTU to ``MTUFilePath`` for the CNI plugin. A write
    failure is fatal only with ``RequireMTUFile`` (as upstream)."""
    mtus, pod = detect_mtus(config, encap)
    path = config.mtu_file_path
    try:
        write_mtu_file(path, pod)
        log.info("Host MTU %d; pod MTU %d written to %s", mtus.host, pod, path)
    except OSError as e:
        if config.require_mtu_file:
            raise DataplaneStartError(f"cannot write MTU file {path}: {e}") from e
        log.warning("Could not write MTU file %s: %s", path, e)
    return mtus


def build_internal_dataplane(
    config: Config,
    *,
    health: HealthAggregator | None,
    metrics: FelixMetrics | None,
    on_in_sync: Any = None,
    on_idle: Any = None,
    encap: Encapsulation | None = None,
) -> InternalDataplane:
    from calico.felix.ifacemonitor import InterfaceMonitor

    encap = encap or Encapsulation()
    mtus = publish_mtu(config, encap)
    remove_unused_vxlan_devices(config, encap)
    parts = build_parts(config, encap=encap, mtus=mtus)
    if config["BPFEnabled"]:
        from calico.felix.bpf import mode  # workload policy in BPF (design/felix-bpf.md)

        parts = mode.enable(config, parts)
    else:
        from calico.felix.bpf.off import clean_up

        clean_up(config)
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
        on_idle=on_idle,
        health_timeout=config.dataplane_watchdog_timeout,
        iface_monitor=monitor,
    )
    return dataplane
