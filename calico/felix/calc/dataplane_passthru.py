"""DataplanePassthru: datastore facts the dataplane needs almost verbatim (pools, WireGuard
keys, host metadata, global BGP service CIDRs), reshaped into messages.

It also owns ``node_addresses``: the one rule for "which IPs is this Node", shared with the
L3 route and VXLAN resolvers so host metadata, route next hops and VTEP parents always agree.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from calico.felix.calc.callbacks import PipelineCallbacks
from calico.felix.calc.dispatcher import Dispatcher
from calico.felix.messages import (
    GlobalBGPConfigUpdate,
    HostMetadataV4V6Update,
    IPAMPool,
    WireguardEndpointUpdate,
    WireguardEndpointV6Update,
)
from calico.model import IPPoolKey, ResourceKey, WireguardKey

Interface = ipaddress.IPv4Interface | ipaddress.IPv6Interface

#: v1 pool encap spelling (what the IPPool processor writes) -> the v3 spelling messages use.
ENCAP_V3 = {"always": "Always", "cross-subnet": "CrossSubnet", "never": "Never", "": "Never"}


@dataclass(frozen=True)
class NodeAddresses:
    """A node's v4/v6 address with its subnet (``10.0.0.1/24``), plus every listed address."""

    v4: ipaddress.IPv4Interface | None = None
    v6: ipaddress.IPv6Interface | None = None
    others: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, ...] = ()


def _interface(text: Any) -> Interface | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return ipaddress.ip_interface(text)
    except ValueError:
        return None


def _spec(node: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = node.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _listed(spec: Mapping[str, Any]) -> list[tuple[str, Interface]]:
    out = []
    for entry in spec.get("addresses") or ():
        if isinstance(entry, Mapping) and (iface := _interface(entry.get("address"))):
            out.append((str(entry.get("type") or ""), iface))
    return out


def node_addresses(node: Mapping[str, Any]) -> NodeAddresses:
    """The BGP addresses when the node has any; otherwise the first InternalIP (then
    ExternalIP) of each family from ``spec.addresses`` (BGP-less clusters, e.g. VXLAN-only)."""
    spec = _spec(node)
    listed = _listed(spec)
    bgp = spec.get("bgp") if isinstance(spec.get("bgp"), Mapping) else {}
    v4 = _interface(bgp.get("ipv4Address"))
    v6 = _interface(bgp.get("ipv6Address"))
    if v4 is None and v6 is None:
        for wanted in ("InternalIP", "ExternalIP"):
            for kind, iface in listed:
                if kind != wanted:
                    continue
                if iface.version == 4 and v4 is None:
                    v4 = iface
                elif iface.version == 6 and v6 is None:
                    v6 = iface
    return NodeAddresses(
        v4=v4 if isinstance(v4, ipaddress.IPv4Interface) else None,
        v6=v6 if isinstance(v6, ipaddress.IPv6Interface) else None,
        others=tuple(iface.ip for _, iface in listed),
    )


def pool_id(key: IPPoolKey) -> str:
    """Pool IDs on the wire: the CIDR with ``/`` -> ``-`` (as in the v1 path)."""
    return str(key.cidr).replace("/", "-")


def ipam_pool(value: Mapping[str, Any]) -> IPAMPool:
    return IPAMPool(
        cidr=str(value.get("cidr", "")),
        masquerade=bool(value.get("masquerade", False)),
        ipip_mode=ENCAP_V3.get(str(value.get("ipip_mode") or ""), "Never"),
        vxlan_mode=ENCAP_V3.get(str(value.get("vxlan_mode") or ""), "Never"),
    )


def host_metadata(name: str, node: Mapping[str, Any]) -> HostMetadataV4V6Update:
    addrs = node_addresses(node)
    bgp = _spec(node).get("bgp")
    asn = bgp.get("asNumber") if isinstance(bgp, Mapping) else None
    meta = node.get("metadata")
    labels = (meta.get("labels") if isinstance(meta, Mapping) else None) or {}
    return HostMetadataV4V6Update(
        hostname=name,
        ipv4_addr=str(addrs.v4.ip) if addrs.v4 else "",
        ipv6_addr=str(addrs.v6.ip) if addrs.v6 else "",
        asnumber=str(asn) if asn not in (None, "") else "",
        labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
    )


def _cidrs(spec: Mapping[str, Any], field: str) -> tuple[str, ...]:
    return tuple(
        str(item["cidr"])
        for item in spec.get(field) or ()
        if isinstance(item, Mapping) and item.get("cidr")
    )


def global_bgp_config(value: Mapping[str, Any] | None) -> GlobalBGPConfigUpdate:
    """A deleted ``default`` BGPConfiguration advertises no service CIDRs."""
    spec = _spec(value) if value else {}
    return GlobalBGPConfigUpdate(
        service_cluster_cidrs=_cidrs(spec, "serviceClusterIPs"),
        service_external_cidrs=_cidrs(spec, "serviceExternalIPs"),
        service_loadbalancer_cidrs=_cidrs(spec, "serviceLoadBalancerIPs"),
    )


class DataplanePassthru:
    """Registers IPPoolKey, WireguardKey and ResourceKey (Node, BGPConfiguration ``default``).

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

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(IPPoolKey, self.on_pool)
        dispatcher.register(WireguardKey, self.on_wireguard)
        dispatcher.register(ResourceKey, self.on_resource)

    def on_pool(self, key: IPPoolKey, value: Any) -> None:
        pid = pool_id(key)
        if value is None:
            if self._pools.pop(pid, None) is not None:
                self._cb.on_ip_pool_remove(pid)
            return
        pool = ipam_pool(value)
        if pool != self._pools.get(pid):
            self._pools[pid] = pool
            self._cb.on_ip_pool_update(pid, pool)

    def on_wireguard(self, key: WireguardKey, value: Any) -> None:
        """An endpoint exists per family once the node has published that family's public
        key; losing the key (or the node) withdraws it."""
        node, value = key.node_name, value or {}
        v4 = None
        if value.get("publicKey"):
            v4 = WireguardEndpointUpdate(
                node, str(value["publicKey"]), str(value.get("interfaceIPv4Addr") or "")
            )
        v6 = None
        if value.get("publicKeyV6"):
            v6 = WireguardEndpointV6Update(
                node, str(value["publicKeyV6"]), str(value.get("interfaceIPv6Addr") or "")
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
        # KubernetesService: not produced (no Kubernetes datastore yet); see the design doc.

    def _on_node(self, name: str, value: Any) -> None:
        if value is None:
            if self._hosts.pop(name, None) is not None:
                self._cb.on_host_metadata_remove(name)
            return
        update = host_metadata(name, value)
        if update != self._hosts.get(name):
            self._hosts[name] = update
            self._cb.on_host_metadata_update(update)
