"""DataplanePassthru: datastore facts the dataplane needs almost verbatim (pools, WireGuard
keys, host metadata, global BGP service CIDRs), reshaped into messages.

Which IPs a Node has is ``calico.model.node_addresses.node_addresses``, shared with the L3
route and VXLAN resolvers so host metadata, route next hops and VTEP parents always agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from calico.felix.calc.callbacks import PipelineCallbacks
from calico.felix.calc.fanout import TypeFanout
from calico.felix.messages import (
    GlobalBGPConfigUpdate,
    HostMetadataV4V6Update,
    IPAMPool,
    ServicePort,
    ServiceUpdate,
    WireguardEndpointUpdate,
    WireguardEndpointV6Update,
)
from calico.model import IPPoolKey, ResourceKey, WireguardKey
from calico.model import values as v1
from calico.model.node_addresses import node_addresses

if TYPE_CHECKING:  # annotations only: Felix creates the models when a resource needs them
    from calico.api.bgp import BGPConfiguration
    from calico.api.cluster import Node

#: v1 pool encap spelling (what the IPPool processor writes) -> the v3 spelling messages use.
ENCAP_V3 = {"always": "Always", "cross-subnet": "CrossSubnet", "never": "Never", "": "Never"}


def pool_id(key: IPPoolKey) -> str:
    """Pool IDs on the wire: the CIDR with ``/`` -> ``-`` (as in the v1 path)."""
    return str(key.cidr).replace("/", "-")


def ipam_pool(value: v1.IPPool) -> IPAMPool:
    return IPAMPool(
        cidr=value.cidr,
        masquerade=value.masquerade,
        ipip_mode=ENCAP_V3.get(value.ipip_mode, "Never"),
        vxlan_mode=ENCAP_V3.get(value.vxlan_mode, "Never"),
    )


def host_metadata(name: str, node: Node) -> HostMetadataV4V6Update:
    addrs = node_addresses(node)
    bgp = node.spec.bgp
    asn = bgp.as_number if bgp is not None else None
    labels = node.metadata.labels or {}
    return HostMetadataV4V6Update(
        hostname=name,
        ipv4_addr=str(addrs.v4.ip) if addrs.v4 else "",
        ipv6_addr=str(addrs.v6.ip) if addrs.v6 else "",
        asnumber=str(asn) if asn not in (None, "") else "",
        labels=tuple(sorted(labels.items())),
    )


def _cidrs(entries: list[Any] | None) -> tuple[str, ...]:
    return tuple(entry.cidr for entry in entries or () if entry.cidr)


def global_bgp_config(value: BGPConfiguration | None) -> GlobalBGPConfigUpdate:
    """A deleted ``default`` BGPConfiguration advertises no service CIDRs."""
    if value is None:
        return GlobalBGPConfigUpdate()
    spec = value.spec
    return GlobalBGPConfigUpdate(
        service_cluster_cidrs=_cidrs(spec.service_cluster_ips),
        service_external_cidrs=_cidrs(spec.service_external_ips),
        service_loadbalancer_cidrs=_cidrs(spec.service_load_balancer_ips),
    )


def service_update(namespace: str, name: str, svc: Any) -> ServiceUpdate:
    """A raw Kubernetes Service (KDD) as the dataplane's ServiceUpdate: type, cluster IPs
    (``clusterIPs``, else ``clusterIP``; ``None`` dropped), load-balancer ingress IPs, external
    IPs and ports (protocol TCP when unset; the port's name kept for flow logs)."""
    spec = svc.get("spec") or {}
    cluster = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    ports = tuple(
        ServicePort(
            str(p.get("protocol") or "TCP"),
            int(p["port"]),
            int(p.get("nodePort") or 0),
            str(p.get("name") or ""),
        )
        for p in spec.get("ports") or ()
        if isinstance(p.get("port"), int)
    )
    return ServiceUpdate(
        name=name,
        namespace=namespace,
        type=str(spec.get("type") or "ClusterIP"),
        cluster_ips=tuple(ip for ip in cluster if ip and ip != "None"),
        loadbalancer_ips=tuple(i["ip"] for i in ingress if isinstance(i, dict) and i.get("ip")),
        external_ips=tuple(spec.get("externalIPs") or ()),
        ports=ports,
    )


class DataplanePassthru:
    """Registers IPPoolKey, WireguardKey and ResourceKey (Node, BGPConfiguration ``default``,
    KubernetesService).

    Invariant: every update it emits is preceded by nothing else for that ID, and a remove
    is only emitted for an ID whose update was emitted (so the sequencer never sees a
    dangling remove); identical consecutive updates are suppressed.
    """

    def __init__(self, callbacks: PipelineCallbacks, hostname: str = "") -> None:
        self._cb = callbacks
        self._hostname = hostname  # kept for parity with the other nodes' constructors
        self._pools: dict[str, IPAMPool] = {}
        self._hosts: dict[str, HostMetadataV4V6Update] = {}
        self._wg_v4: dict[str, WireguardEndpointUpdate] = {}
        self._wg_v6: dict[str, WireguardEndpointV6Update] = {}
        self._bgp: GlobalBGPConfigUpdate | None = None
        self._services: dict[tuple[str, str], ServiceUpdate] = {}

    def register(self, fanout: TypeFanout) -> None:
        fanout.register(IPPoolKey, self.on_pool)
        fanout.register(WireguardKey, self.on_wireguard)
        fanout.register(ResourceKey, self.on_resource)

    def on_pool(self, key: IPPoolKey, value: v1.IPPool | None) -> None:
        pid = pool_id(key)
        if value is None:
            if self._pools.pop(pid, None) is not None:
                self._cb.on_ip_pool_remove(pid)
            return
        pool = ipam_pool(value)
        if pool != self._pools.get(pid):
            self._pools[pid] = pool
            self._cb.on_ip_pool_update(pid, pool)

    def on_wireguard(self, key: WireguardKey, value: v1.Wireguard | None) -> None:
        """An endpoint exists per family once the node has published that family's public
        key; losing the key (or the node) withdraws it."""
        node, value = key.node_name, value or v1.Wireguard()
        v4 = None
        if value.public_key:
            v4 = WireguardEndpointUpdate(node, value.public_key, value.interface_ipv4_addr or "")
        v6 = None
        if value.public_key_v6:
            v6 = WireguardEndpointV6Update(
                node, value.public_key_v6, value.interface_ipv6_addr or ""
            )
        if v4 != self._wg_v4.get(node):
            if v4 is None:
                del self._wg_v4[node]
                self._cb.on_wireguard_remove(node)
            else:
                self._wg_v4[node] = v4
                self._cb.on_wireguard_update(v4)
        if v6 != self._wg_v6.get(node):
            if v6 is None:
                del self._wg_v6[node]
                self._cb.on_wireguard_v6_remove(node)
            else:
                self._wg_v6[node] = v6
                self._cb.on_wireguard_v6_update(v6)

    def on_resource(self, key: ResourceKey, value: Any) -> None:
        if key.kind == "Node":
            self._on_node(key.name, value)
        elif key.kind == "BGPConfiguration" and key.name == "default":
            update = global_bgp_config(value)
            if update != self._bgp:
                self._bgp = update
                self._cb.on_global_bgp_config_update(update)
        elif key.kind == "KubernetesService":
            self._on_service(key.namespace or "", key.name, value)

    def _on_service(self, namespace: str, name: str, value: Any) -> None:
        ident = (namespace, name)
        if not isinstance(value, dict):
            if self._services.pop(ident, None) is not None:
                self._cb.on_service_remove(name, namespace)
            return
        update = service_update(namespace, name, value)
        if update != self._services.get(ident):
            self._services[ident] = update
            self._cb.on_service_update(update)

    def _on_node(self, name: str, value: Any) -> None:
        if value is None:
            if self._hosts.pop(name, None) is not None:
                self._cb.on_host_metadata_remove(name)
            return
        update = host_metadata(name, value)
        if update != self._hosts.get(name):
            self._hosts[name] = update
            self._cb.on_host_metadata_update(update)
