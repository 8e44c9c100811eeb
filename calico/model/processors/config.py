"""Configuration-like kinds -> Felix config keys: ClusterInformation, FelixConfiguration and
the per-host parts of Node (tunnel addresses, WireGuard; with host-local IPAM, its pod CIDRs
as blocks: ``node_pod_cidr``).

Each set field becomes its own key (a string value) so Felix's config batcher can merge sources
per parameter;
an unset field simply produces no key (the syncer turns "no longer produced" into a delete).
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

from calico.model.ipam_keys import BlockKey
from calico.model.keys import GlobalConfigKey, HostConfigKey, ReadyFlagKey, WireguardKey
from calico.model.processors.common import Output, decode, ip_str
from calico.model.resources import ResourceKey
from calico.model.values import AllocationBlock, Wireguard

log = logging.getLogger(__name__)


def _model(kind: str) -> Any:
    """The v3 model class of ``kind``, imported on first use: ``leannode`` builds its output
    with this module's functions, and a clean start imports no model."""
    if kind == "FelixConfiguration":
        from calico.api import felixconfig

        return felixconfig.FelixConfiguration
    from calico.api import cluster

    return getattr(cluster, kind)


GLOBAL_CONFIG_NAME = "default"
NODE_CONFIG_PREFIX = "node."
ANNOTATION_PREFIX = "config.projectcalico.org/"
_CLUSTER_FIELDS = (
    ("cluster_guid", "ClusterGUID"),
    ("cluster_type", "ClusterType"),
    ("calico_version", "CalicoVersion"),
    ("variant", "Variant"),
)


def cluster_information(key: ResourceKey, value: Any) -> Output:
    """``default`` only: one GlobalConfigKey per set field; datastoreReady -> the Ready flag
    (a boolean) that stops Felix while an upgrade is in progress."""
    res = decode(key, value, _model("ClusterInformation"))
    if key.name != GLOBAL_CONFIG_NAME:
        raise ValueError(f"ClusterInformation {key.name!r}: only 'default' is used")
    out: Output = {}
    for attr, name in _CLUSTER_FIELDS:
        if field := getattr(res.spec, attr):
            out[GlobalConfigKey(name)] = str(field)
    if res.spec.datastore_ready is not None:
        out[ReadyFlagKey()] = bool(res.spec.datastore_ready)
    return out


def felix_configuration(key: ResourceKey, value: Any) -> Output:
    """``default`` -> GlobalConfigKeys, ``node.<host>`` -> that host's HostConfigKeys, both
    with ``config.projectcalico.org/<Param>`` annotations overriding (unvalidated, as
    upstream). Any other name is a nodeSelector-scoped config: passed through whole, the
    config batcher matches it against the local Node's labels."""
    res = decode(key, value, _model("FelixConfiguration"))
    if key.name == GLOBAL_CONFIG_NAME:
        host = ""
    elif key.name.startswith(NODE_CONFIG_PREFIX):
        host = key.name[len(NODE_CONFIG_PREFIX) :]
    else:
        return {key: res}
    from calico.model.processors.confignames import spec_params  # the model's fields

    params = spec_params(res.spec)
    for name, text in (res.metadata.annotations or {}).items():
        if name.startswith(ANNOTATION_PREFIX) and name != ANNOTATION_PREFIX:
            params[name[len(ANNOTATION_PREFIX) :]] = text
    if host:
        return {HostConfigKey(host, n): v for n, v in params.items()}
    return {GlobalConfigKey(n): v for n, v in params.items()}


def node(key: ResourceKey, value: Any) -> Output:
    """Tunnel addresses as HostConfigKeys (only those set), the Node itself (routes, host
    metadata, BGP peers) and, when any WireGuard field is set, the node's WireguardKey."""
    return node_output(key, decode(key, value, _model("Node")))


def node_output(key: ResourceKey, res: Any) -> Output:
    """``node``'s output from a read Node: the model, or ``leannode``'s view of it."""
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
    out: Output = {HostConfigKey(name, k): v for k, v in cfg.items()}
    out[key] = res
    wg_spec, status = spec.wireguard, res.status
    wg = Wireguard(
        interface_ipv4_addr=_opt_ip(wg_spec.interface_ipv4_address if wg_spec else None),
        public_key=(status.wireguard_public_key or "") if status else "",
        interface_ipv6_addr=_opt_ip(wg_spec.interface_ipv6_address if wg_spec else None),
        public_key_v6=(status.wireguard_public_key_v6 or "") if status else "",
    )
    if wg != Wireguard():
        out[WireguardKey(name)] = wg
    return out


def node_pod_cidr(key: ResourceKey, value: Any) -> Output:
    """Felix's Node processor in host-local IPAM mode (upstream's felix node processor with
    ``usePodCIDR``): ``node``'s keys plus, per ``status.podCIDRs`` entry, a BlockKey whose
    block holds only its CIDR and affinity ``host:<node>``, so Felix's route resolution
    (VXLAN, IPIP) treats each pod CIDR as that node's block. Unparsable CIDRs are skipped with
    a warning, as upstream; a CIDR that goes away is deleted by the syncer's diff."""
    return node_pod_cidr_output(key, decode(key, value, _model("Node")))


def node_pod_cidr_output(key: ResourceKey, res: Any) -> Output:
    """``node_pod_cidr``'s output from a read Node (the model or ``leannode``'s view)."""
    out = node_output(key, res)
    status = out[key].status
    for text in (status.pod_cidrs if status else None) or []:
        try:
            cidr = str(ipaddress.ip_network(text, strict=False))
        except ValueError:
            log.warning("Node %s: ignoring unparsable pod CIDR %r", key.name, text)
            continue
        out[BlockKey(cidr)] = AllocationBlock(cidr=cidr, affinity=f"host:{key.name}")
    return out


def _opt_ip(text: str | None) -> str | None:
    return ip_str(text) if text else None
