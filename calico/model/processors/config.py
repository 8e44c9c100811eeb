"""Configuration-like kinds -> Felix config keys: ClusterInformation, FelixConfiguration and
the per-host parts of Node (tunnel addresses, WireGuard).

Each set field becomes its own key so Felix's config batcher can merge sources per parameter;
an unset field simply produces no key (the syncer turns "no longer produced" into a delete).
"""

from __future__ import annotations

from typing import Any

from calico.api.cluster import ClusterInformation, Node
from calico.api.felixconfig import FelixConfiguration
from calico.model.keys import GlobalConfigKey, HostConfigKey, ReadyFlagKey, WireguardKey
from calico.model.processors.common import Output, decode, ip_str, passthrough
from calico.model.processors.confignames import spec_params

GLOBAL_CONFIG_NAME = "default"
NODE_CONFIG_PREFIX = "node."
ANNOTATION_PREFIX = "config.projectcalico.org/"
_CLUSTER_FIELDS = (
    ("cluster_guid", "ClusterGUID"),
    ("cluster_type", "ClusterType"),
    ("calico_version", "CalicoVersion"),
    ("variant", "Variant"),
)


def cluster_information(path: str, value: Any) -> Output:
    """``default`` only: one GlobalConfigKey per set field; datastoreReady -> the Ready flag
    (a JSON boolean) that stops Felix while an upgrade is in progress."""
    key, res = decode(path, value, ClusterInformation)
    if key.name != GLOBAL_CONFIG_NAME:
        raise ValueError(f"ClusterInformation {key.name!r}: only 'default' is used")
    out: Output = {}
    for attr, name in _CLUSTER_FIELDS:
        if field := getattr(res.spec, attr):
            out[GlobalConfigKey(name).default_path()] = field
    if res.spec.datastore_ready is not None:
        out[ReadyFlagKey().default_path()] = res.spec.datastore_ready
    return out


def felix_configuration(path: str, value: Any) -> Output:
    """``default`` -> GlobalConfigKeys, ``node.<host>`` -> that host's HostConfigKeys, both
    with ``config.projectcalico.org/<Param>`` annotations overriding (unvalidated, as
    upstream). Any other name is a nodeSelector-scoped config: passed through whole, the
    config batcher matches it against the local Node's labels."""
    key, res = decode(path, value, FelixConfiguration)
    if key.name == GLOBAL_CONFIG_NAME:
        host = ""
    elif key.name.startswith(NODE_CONFIG_PREFIX):
        host = key.name[len(NODE_CONFIG_PREFIX) :]
    else:
        return passthrough(path, value)
    params = spec_params(res.spec)
    for name, text in (res.metadata.annotations or {}).items():
        if name.startswith(ANNOTATION_PREFIX) and name != ANNOTATION_PREFIX:
            params[name[len(ANNOTATION_PREFIX) :]] = text
    if host:
        return {HostConfigKey(host, n).default_path(): v for n, v in params.items()}
    return {GlobalConfigKey(n).default_path(): v for n, v in params.items()}


def node(path: str, value: Any) -> Output:
    """Tunnel addresses as HostConfigKeys (only those set), the Node itself (routes, host
    metadata, BGP peers) and, when any WireGuard field is set, the node's WireguardKey."""
    key, res = decode(path, value, Node)
    spec, name = res.spec, key.name
    cfg: dict[str, str] = {}
    if spec.bgp is not None and spec.bgp.ipv4_ipip_tunnel_addr:
        cfg["IpInIpTunnelAddr"] = ip_str(spec.bgp.ipv4_ipip_tunnel_addr)
    if spec.ipv4_vxlan_tunnel_addr:
        cfg["IPv4VXLANTunnelAddr"] = ip_str(spec.ipv4_vxlan_tunnel_addr)
    if spec.vxlan_tunnel_mac_addr:
        cfg["VXLANTunnelMACAddr"] = spec.vxlan_tunnel_mac_addr
    if spec.ipv6_vxlan_tunnel_addr:
        cfg["IPv6VXLANTunnelAddr"] = ip_str(spec.ipv6_vxlan_tunnel_addr)
    if spec.vxlan_tunnel_mac_addr_v6:
        cfg["VXLANTunnelMACAddrV6"] = spec.vxlan_tunnel_mac_addr_v6
    out: Output = {HostConfigKey(name, k).default_path(): v for k, v in cfg.items()}
    out.update(passthrough(path, value))
    wg: dict[str, str] = {}
    if spec.wireguard is not None and spec.wireguard.interface_ipv4_address:
        wg["interfaceIPv4Addr"] = ip_str(spec.wireguard.interface_ipv4_address)
    if res.status is not None and res.status.wireguard_public_key:
        wg["publicKey"] = res.status.wireguard_public_key
    if spec.wireguard is not None and spec.wireguard.interface_ipv6_address:
        wg["interfaceIPv6Addr"] = ip_str(spec.wireguard.interface_ipv6_address)
    if res.status is not None and res.status.wireguard_public_key_v6:
        wg["publicKeyV6"] = res.status.wireguard_public_key_v6
    if wg:
        out[WireguardKey(name).default_path()] = wg
    return out
