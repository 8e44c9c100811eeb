"""List prefixes: the path roots syncers and stores scan to list one family of keys.

Every prefix ends with ``/`` so that listing host ``node1`` never picks up ``node10``; that is a
deliberate difference from upstream's ``defaultPathRoot`` strings, which stop at the name.
A prefix may cover more than one key type when the grammar nests them (``POLICY_PREFIX``
covers tiers and profiles too); consumers classify each result with ``key_from_default_path``.
"""

from __future__ import annotations

from calico.model.escaping import InvalidKeyError, escape_name
from calico.model.keys import RESERVED_POLICY_SEGMENTS
from calico.model.resources import RESOURCE_PREFIX, resource_prefix

__all__ = [
    "BGP_GLOBAL_PREFIX",
    "GLOBAL_CONFIG_PREFIX",
    "HOST_PREFIX",
    "IPAM_HANDLE_PREFIX",
    "IP_POOL_PREFIX",
    "NETWORK_SET_PREFIX",
    "POLICY_PREFIX",
    "PROFILE_PREFIX",
    "RESOURCE_PREFIX",
    "TIER_PREFIX",
    "bgp_host_prefix",
    "block_affinity_prefix",
    "felix_status_prefix",
    "host_config_prefix",
    "host_endpoint_prefix",
    "host_prefix",
    "host_workload_prefix",
    "ip_pool_prefix",
    "ipam_block_prefix",
    "policy_prefix",
    "resource_prefix",
]

GLOBAL_CONFIG_PREFIX = "/calico/v1/config/"
HOST_PREFIX = "/calico/v1/host/"
POLICY_PREFIX = "/calico/v1/policy/"
TIER_PREFIX = "/calico/v1/policy/tier/"
PROFILE_PREFIX = "/calico/v1/policy/profile/"
NETWORK_SET_PREFIX = "/calico/v1/netset/"
IP_POOL_PREFIX = "/calico/v1/ipam/"
IPAM_HANDLE_PREFIX = "/calico/ipam/v2/handle/"
BGP_GLOBAL_PREFIX = "/calico/bgp/v1/global/"


def _host(value: str, field: str = "hostname") -> str:
    if not value or "/" in value:
        raise InvalidKeyError(f"{field} {value!r} is empty or contains '/'")
    return value


def host_prefix(hostname: str) -> str:
    """Everything filed under one host: config, endpoints, metadata, wireguard."""
    return f"{HOST_PREFIX}{_host(hostname)}/"


def host_config_prefix(hostname: str) -> str:
    """All ``HostConfigKey``s of one host."""
    return f"{HOST_PREFIX}{_host(hostname)}/config/"


def host_endpoint_prefix(hostname: str) -> str:
    """All ``HostEndpointKey``s of one host."""
    return f"{HOST_PREFIX}{_host(hostname)}/endpoint/"


def host_workload_prefix(
    hostname: str, orchestrator_id: str | None = None, workload_id: str | None = None
) -> str:
    """All ``WorkloadEndpointKey``s of one host, optionally narrowed to an orchestrator/workload."""
    prefix = f"{HOST_PREFIX}{_host(hostname)}/workload/"
    if orchestrator_id:
        prefix += f"{escape_name(orchestrator_id)}/"
        if workload_id:
            prefix += f"{escape_name(workload_id)}/endpoint/"
    elif workload_id:
        raise InvalidKeyError("workload_id needs orchestrator_id")
    return prefix


def policy_prefix(kind: str | None = None, namespace: str | None = None) -> str:
    """Policies of one kind (and namespace). Without ``kind`` the prefix also covers tiers and
    profiles, which share the ``/calico/v1/policy/`` subtree."""
    if not kind:
        if namespace:
            raise InvalidKeyError("namespace needs kind")
        return POLICY_PREFIX
    if "/" in kind or kind in RESERVED_POLICY_SEGMENTS:
        raise InvalidKeyError(f"{kind!r} is not a policy kind")
    prefix = f"{POLICY_PREFIX}{kind}/"
    if namespace is not None:
        # "" selects the cluster-scoped policies of the kind (the "//" paths).
        if "/" in namespace:
            raise InvalidKeyError(f"namespace {namespace!r} contains '/'")
        prefix += f"{namespace}/"
    return prefix


def ipam_block_prefix(version: int | None = None) -> str:
    """All ``BlockKey``s, optionally of one IP version."""
    if version is None:
        return "/calico/ipam/v2/assignment/"
    return f"/calico/ipam/v2/assignment/ipv{_version(version)}/block/"


def block_affinity_prefix(host: str | None = None, version: int | None = None) -> str:
    """All ``BlockAffinityKey``s, optionally of one host and IP version."""
    if host is None:
        if version is not None:
            raise InvalidKeyError("version needs host")
        return "/calico/ipam/v2/host/"
    prefix = f"/calico/ipam/v2/host/{_host(host, 'host')}/"
    if version is not None:
        prefix += f"ipv{_version(version)}/block/"
    return prefix


def ip_pool_prefix(version: int | None = None) -> str:
    """All ``IPPoolKey``s, optionally of one IP version."""
    return IP_POOL_PREFIX if version is None else f"{IP_POOL_PREFIX}v{_version(version)}/pool/"


def bgp_host_prefix(node_name: str) -> str:
    """All per-node BGP config values and peerings of one node."""
    return f"/calico/bgp/v1/host/{_host(node_name, 'node_name')}/"


def felix_status_prefix(hostname: str, region: str) -> str:
    """All v2 status keys Felix on ``hostname`` writes (process and workload status)."""
    return f"/calico/felix/v2/{_host(region, 'region')}/host/{_host(hostname)}/"


def _version(version: int) -> int:
    if version not in (4, 6):
        raise InvalidKeyError(f"IP version must be 4 or 6, not {version!r}")
    return version
