"""v1 model keys and their default paths: the one string keyspace shared by the syncers, the
Typha cache and the calc-graph dispatcher (see design/model.md).

``key.default_path()`` renders a key; ``key_from_default_path(path)`` parses any path back (None
when unknown). Keys are frozen, hashable dataclasses; dispatch on ``type(key)``.

Names resolve on first use (PEP 562), so importing one light submodule (the CNI plugin
needs only a few) does not load every key family.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from calico.model.base import Key
    from calico.model.bgp_keys import (
        DEFAULT_BGP_PORT,
        GlobalBGPConfigKey,
        GlobalBGPPeerKey,
        NodeBGPConfigKey,
        NodeBGPPeerKey,
    )
    from calico.model.escaping import InvalidKeyError, escape_name, unescape_name
    from calico.model.ipam_keys import BlockAffinityKey, BlockKey, IPAMHandleKey, IPPoolKey
    from calico.model.keys import (
        GlobalConfigKey,
        HostConfigKey,
        HostEndpointKey,
        HostMetadataKey,
        NetworkSetKey,
        PolicyKey,
        ProfileLabelsKey,
        ProfileRulesKey,
        ReadyFlagKey,
        TierKey,
        WireguardKey,
        WorkloadEndpointKey,
    )
    from calico.model.names import (
        WepNameError,
        parse_wep_name,
        wep_key_from_v3,
        wep_name,
        wep_v3_from_key,
    )
    from calico.model.paths import key_from_default_path, upgrade_legacy_policy
    from calico.model.prefixes import (
        BGP_GLOBAL_PREFIX,
        GLOBAL_CONFIG_PREFIX,
        HOST_PREFIX,
        IP_POOL_PREFIX,
        IPAM_HANDLE_PREFIX,
        NETWORK_SET_PREFIX,
        POLICY_PREFIX,
        PROFILE_PREFIX,
        TIER_PREFIX,
        bgp_host_prefix,
        block_affinity_prefix,
        felix_status_prefix,
        host_config_prefix,
        host_endpoint_prefix,
        host_prefix,
        host_workload_prefix,
        ip_pool_prefix,
        ipam_block_prefix,
        policy_prefix,
    )
    from calico.model.resources import (
        KINDS,
        KINDS_BY_PLURAL,
        RESOURCE_PREFIX,
        KindInfo,
        ResourceKey,
        kind_info,
        resource_prefix,
    )
    from calico.model.status_keys import (
        NO_REGION,
        ActiveStatusReportKey,
        HostEndpointStatusKey,
        LastStatusReportKey,
        WorkloadEndpointStatusKey,
    )

__all__ = [
    "BGP_GLOBAL_PREFIX",
    "DEFAULT_BGP_PORT",
    "GLOBAL_CONFIG_PREFIX",
    "HOST_PREFIX",
    "IPAM_HANDLE_PREFIX",
    "IP_POOL_PREFIX",
    "KINDS",
    "KINDS_BY_PLURAL",
    "NETWORK_SET_PREFIX",
    "NO_REGION",
    "POLICY_PREFIX",
    "PROFILE_PREFIX",
    "RESOURCE_PREFIX",
    "TIER_PREFIX",
    "ActiveStatusReportKey",
    "BlockAffinityKey",
    "BlockKey",
    "GlobalBGPConfigKey",
    "GlobalBGPPeerKey",
    "GlobalConfigKey",
    "HostConfigKey",
    "HostEndpointKey",
    "HostEndpointStatusKey",
    "HostMetadataKey",
    "IPAMHandleKey",
    "IPPoolKey",
    "InvalidKeyError",
    "Key",
    "KindInfo",
    "LastStatusReportKey",
    "NetworkSetKey",
    "NodeBGPConfigKey",
    "NodeBGPPeerKey",
    "PolicyKey",
    "ProfileLabelsKey",
    "ProfileRulesKey",
    "ReadyFlagKey",
    "ResourceKey",
    "TierKey",
    "WepNameError",
    "WireguardKey",
    "WorkloadEndpointKey",
    "WorkloadEndpointStatusKey",
    "bgp_host_prefix",
    "block_affinity_prefix",
    "escape_name",
    "felix_status_prefix",
    "host_config_prefix",
    "host_endpoint_prefix",
    "host_prefix",
    "host_workload_prefix",
    "ip_pool_prefix",
    "ipam_block_prefix",
    "key_from_default_path",
    "kind_info",
    "parse_wep_name",
    "policy_prefix",
    "resource_prefix",
    "unescape_name",
    "upgrade_legacy_policy",
    "wep_key_from_v3",
    "wep_name",
    "wep_v3_from_key",
]

_SOURCES = {
    "ActiveStatusReportKey": "calico.model.status_keys",
    "BGP_GLOBAL_PREFIX": "calico.model.prefixes",
    "BlockAffinityKey": "calico.model.ipam_keys",
    "BlockKey": "calico.model.ipam_keys",
    "DEFAULT_BGP_PORT": "calico.model.bgp_keys",
    "GLOBAL_CONFIG_PREFIX": "calico.model.prefixes",
    "GlobalBGPConfigKey": "calico.model.bgp_keys",
    "GlobalBGPPeerKey": "calico.model.bgp_keys",
    "GlobalConfigKey": "calico.model.keys",
    "HOST_PREFIX": "calico.model.prefixes",
    "HostConfigKey": "calico.model.keys",
    "HostEndpointKey": "calico.model.keys",
    "HostEndpointStatusKey": "calico.model.status_keys",
    "HostMetadataKey": "calico.model.keys",
    "IPAMHandleKey": "calico.model.ipam_keys",
    "IPAM_HANDLE_PREFIX": "calico.model.prefixes",
    "IPPoolKey": "calico.model.ipam_keys",
    "IP_POOL_PREFIX": "calico.model.prefixes",
    "InvalidKeyError": "calico.model.escaping",
    "KINDS": "calico.model.resources",
    "KINDS_BY_PLURAL": "calico.model.resources",
    "Key": "calico.model.base",
    "KindInfo": "calico.model.resources",
    "LastStatusReportKey": "calico.model.status_keys",
    "NETWORK_SET_PREFIX": "calico.model.prefixes",
    "NO_REGION": "calico.model.status_keys",
    "NetworkSetKey": "calico.model.keys",
    "NodeBGPConfigKey": "calico.model.bgp_keys",
    "NodeBGPPeerKey": "calico.model.bgp_keys",
    "POLICY_PREFIX": "calico.model.prefixes",
    "PROFILE_PREFIX": "calico.model.prefixes",
    "PolicyKey": "calico.model.keys",
    "ProfileLabelsKey": "calico.model.keys",
    "ProfileRulesKey": "calico.model.keys",
    "RESOURCE_PREFIX": "calico.model.resources",
    "ReadyFlagKey": "calico.model.keys",
    "ResourceKey": "calico.model.resources",
    "TIER_PREFIX": "calico.model.prefixes",
    "TierKey": "calico.model.keys",
    "WepNameError": "calico.model.names",
    "WireguardKey": "calico.model.keys",
    "WorkloadEndpointKey": "calico.model.keys",
    "WorkloadEndpointStatusKey": "calico.model.status_keys",
    "bgp_host_prefix": "calico.model.prefixes",
    "block_affinity_prefix": "calico.model.prefixes",
    "escape_name": "calico.model.escaping",
    "felix_status_prefix": "calico.model.prefixes",
    "host_config_prefix": "calico.model.prefixes",
    "host_endpoint_prefix": "calico.model.prefixes",
    "host_prefix": "calico.model.prefixes",
    "host_workload_prefix": "calico.model.prefixes",
    "ip_pool_prefix": "calico.model.prefixes",
    "ipam_block_prefix": "calico.model.prefixes",
    "key_from_default_path": "calico.model.paths",
    "kind_info": "calico.model.resources",
    "parse_wep_name": "calico.model.names",
    "policy_prefix": "calico.model.prefixes",
    "resource_prefix": "calico.model.resources",
    "unescape_name": "calico.model.escaping",
    "upgrade_legacy_policy": "calico.model.paths",
    "wep_key_from_v3": "calico.model.names",
    "wep_name": "calico.model.names",
    "wep_v3_from_key": "calico.model.names",
}


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value = getattr(importlib.import_module(source), name)
    return value
