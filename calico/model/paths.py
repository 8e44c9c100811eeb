"""``key_from_default_path``: the one parser for the whole v1/v3 keyspace.

The path is split on ``/`` once and dispatched on its leading segments, so classifying a path
costs a split plus a few dict/compare operations. Every branch checks the exact segment count
(so ``a/b`` can never be mistaken for one segment) and that identifiers are non-empty; it returns
None for anything it does not recognise rather than raising, because syncers feed it whatever
the datastore holds.
"""

from __future__ import annotations

from collections.abc import Callable

from calico.model.base import Key
from calico.model.bgp_keys import (
    DEFAULT_BGP_PORT,
    PEER_SEGMENTS,
    GlobalBGPConfigKey,
    GlobalBGPPeerKey,
    NodeBGPConfigKey,
    NodeBGPPeerKey,
)
from calico.model.escaping import IPAddress, parse_address, parse_cidr_segment, unescape_name
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
from calico.model.resources import KINDS_BY_PLURAL, ResourceKey
from calico.model.status_keys import (
    ActiveStatusReportKey,
    HostEndpointStatusKey,
    LastStatusReportKey,
    WorkloadEndpointStatusKey,
)

_V4_V6 = {"v4": 4, "v6": 6}
_IPV4_IPV6 = {"ipv4": 4, "ipv6": 6}
_STAGED_PREFIX = "staged:"
_KNP_PREFIX = "knp.default."

Parts = list[str]


def key_from_default_path(path: str) -> Key | None:
    """Parse a default path into its key, or None if it is not a path of any known key.

    v1 paths may omit the leading ``/``; the Ready flag and v3 resource paths may not.
    """
    rooted = path.startswith("/")
    parts = (path[1:] if rooted else path).split("/")
    if len(parts) < 3 or parts[0] != "calico":
        return None
    parser = _AREAS.get(parts[1])
    return parser(parts, rooted) if parser is not None else None


def upgrade_legacy_policy(tier: str, v1_name: str) -> PolicyKey | None:
    """Map a pre-kind ``/calico/v1/policy/tier/<tier>/policy/<name>`` entry to a PolicyKey.

    Legacy v1 names encoded the kind: ``<ns>/<name>`` for namespaced policies, a ``staged:``
    prefix on the name part for staged ones, ``knp.default.`` for Kubernetes ones. The tier is
    not part of the new key (it lives in the policy value), so it is only checked to be present.
    """
    if not tier or not v1_name:
        return None
    namespace, sep, name = v1_name.partition("/")
    if not sep:
        namespace, name = "", v1_name
    elif "/" in name or not namespace:
        return None
    staged = name.startswith(_STAGED_PREFIX)
    if staged:
        name = name[len(_STAGED_PREFIX) :]
    if not name:
        return None
    if not namespace:
        kind = "StagedGlobalNetworkPolicy" if staged else "GlobalNetworkPolicy"
    elif name.startswith(_KNP_PREFIX):
        kind = "StagedKubernetesNetworkPolicy" if staged else "KubernetesNetworkPolicy"
    else:
        kind = "StagedNetworkPolicy" if staged else "NetworkPolicy"
    return PolicyKey(kind=kind, namespace=namespace, name=name)


def _v1(parts: Parts, rooted: bool) -> Key | None:
    area, n = parts[2], len(parts)
    if area == "host":
        return _v1_host(parts)
    if area == "policy":
        return _v1_policy(parts)
    if area == "config":
        name = "/".join(parts[3:])
        return GlobalConfigKey(name) if name else None
    if area == "netset":
        return NetworkSetKey(unescape_name(parts[3])) if n == 4 and parts[3] else None
    if area == "ipam":
        if n != 6 or parts[4] != "pool" or (version := _V4_V6.get(parts[3])) is None:
            return None
        cidr = parse_cidr_segment(parts[5], version)
        return IPPoolKey(cidr) if cidr is not None else None
    if area == "Ready":
        return ReadyFlagKey() if rooted and n == 3 else None
    return None


def _v1_host(parts: Parts) -> Key | None:
    n = len(parts)
    if n < 5 or not (host := parts[3]):
        return None
    what = parts[4]
    if what == "workload":
        if n != 9 or parts[7] != "endpoint" or not (parts[5] and parts[6] and parts[8]):
            return None
        return WorkloadEndpointKey(
            host, unescape_name(parts[5]), unescape_name(parts[6]), unescape_name(parts[8])
        )
    if what == "endpoint":
        return HostEndpointKey(host, unescape_name(parts[5])) if n == 6 and parts[5] else None
    if what == "config":
        name = "/".join(parts[5:])
        return HostConfigKey(host, name) if name else None
    if n != 5:
        return None
    if what == "metadata":
        return HostMetadataKey(host)
    if what == "wireguard":
        return WireguardKey(host)
    return None


def _v1_policy(parts: Parts) -> Key | None:
    n = len(parts)
    if n == 6:
        first, middle, last = parts[3], parts[4], parts[5]
        if first == "tier":
            return TierKey(unescape_name(middle)) if last == "metadata" and middle else None
        if first == "profile":
            if not middle:
                return None
            if last == "rules":
                return ProfileRulesKey(unescape_name(middle))
            if last == "labels":
                return ProfileLabelsKey(unescape_name(middle))
            return None
        return PolicyKey(first, middle, last) if first and last else None
    if n == 7 and parts[3] == "tier" and parts[5] == "policy":
        return upgrade_legacy_policy(unescape_name(parts[4]), unescape_name(parts[6]))
    return None


def _bgp(parts: Parts, rooted: bool) -> Key | None:
    n = len(parts)
    if n < 5 or parts[2] != "v1":
        return None
    scope = parts[3]
    if scope == "global":
        return _bgp_entry(None, parts[4:])
    if scope == "host" and n >= 6 and parts[4]:
        return _bgp_entry(parts[4], parts[5:])
    return None


def _bgp_entry(node: str | None, rest: Parts) -> Key | None:
    """Config value or peering below ``global/`` or ``host/<node>/``."""
    if rest[0] in PEER_SEGMENTS and len(rest) > 1:
        if len(rest) != 2:
            return None
        peer = _parse_peer(rest[1], 4 if rest[0] == "peer_v4" else 6)
        if peer is None:
            return None
        ip, port = peer
        return GlobalBGPPeerKey(ip, port) if node is None else NodeBGPPeerKey(node, ip, port)
    name = "/".join(rest)
    if not name:
        return None
    return GlobalBGPConfigKey(name) if node is None else NodeBGPConfigKey(node, name)


def _parse_peer(segment: str, version: int) -> tuple[IPAddress, int] | None:
    ip_text, sep, port_text = segment.partition("-")
    port = DEFAULT_BGP_PORT
    if sep:
        if not (port_text.isascii() and port_text.isdigit()):
            return None
        port = int(port_text)
        if not 0 < port < 65536:
            return None
    ip = parse_address(ip_text, version)
    return (ip, port) if ip is not None else None


def _ipam(parts: Parts, rooted: bool) -> Key | None:
    n = len(parts)
    if n < 5 or parts[2] != "v2":
        return None
    area = parts[3]
    if area == "assignment":
        if n != 7 or parts[5] != "block" or (version := _IPV4_IPV6.get(parts[4])) is None:
            return None
        cidr = parse_cidr_segment(parts[6], version)
        return BlockKey(cidr) if cidr is not None else None
    if area == "host":
        if n != 8 or not parts[4] or parts[6] != "block":
            return None
        if (version := _IPV4_IPV6.get(parts[5])) is None:
            return None
        cidr = parse_cidr_segment(parts[7], version)
        return BlockAffinityKey(parts[4], cidr) if cidr is not None else None
    if area == "handle":
        return IPAMHandleKey(parts[4]) if n == 5 and parts[4] else None
    return None


def _resources(parts: Parts, rooted: bool) -> Key | None:
    n = len(parts)
    if not rooted or n not in (6, 7) or parts[2] != "v3" or parts[3] != "projectcalico.org":
        return None
    info = KINDS_BY_PLURAL.get(parts[4])
    if info is None or info.namespaced != (n == 7):
        return None
    if n == 6:
        return ResourceKey(info.kind, parts[5]) if parts[5] else None
    return ResourceKey(info.kind, parts[6], parts[5]) if parts[5] and parts[6] else None


def _felix(parts: Parts, rooted: bool) -> Key | None:
    n = len(parts)
    version = parts[2]
    if version == "v1":
        if n != 7 or parts[3] != "host" or parts[5] != "endpoint" or not parts[4]:
            return None
        return HostEndpointStatusKey(parts[4], unescape_name(parts[6])) if parts[6] else None
    if version != "v2" or n < 7 or parts[4] != "host":
        return None
    region, host, what = parts[3], parts[5], parts[6]
    if not region or not host:
        return None
    if n == 7:
        if what == "status":
            return ActiveStatusReportKey(host, region)
        if what == "last_reported_status":
            return LastStatusReportKey(host, region)
        return None
    if n != 11 or what != "workload" or parts[9] != "endpoint":
        return None
    if not (parts[7] and parts[8] and parts[10]):
        return None
    return WorkloadEndpointStatusKey(
        host,
        unescape_name(parts[7]),
        unescape_name(parts[8]),
        unescape_name(parts[10]),
        region,
    )


_AREAS: dict[str, Callable[[Parts, bool], Key | None]] = {
    "v1": _v1,
    "bgp": _bgp,
    "ipam": _ipam,
    "resources": _resources,
    "felix": _felix,
}
