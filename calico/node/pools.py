"""Default IP pools: what the ``CALICO_IPV{4,6}POOL_*`` variables ask for, created only when
the datastore has no pool of that family yet (so an operator's pools are never second-guessed).

Everything is parsed and validated before the datastore is touched, so a typo fails startup
without leaving half a configuration behind.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from calico.api import APIError, Resource, parse_resource
from calico.api import validators as v
from calico.datastore.client import Client
from calico.datastore.errors import DatastoreError, ResourceAlreadyExistsError
from calico.node.errors import NodeError

log = logging.getLogger(__name__)

DEFAULT_IPV4_POOL_CIDR = "192.168.0.0/16"
DEFAULT_BLOCK_SIZE = {4: 26, 6: 122}
BLOCK_SIZE_RANGE = {4: (20, 32), 6: (116, 128)}
POOL_NAME = {4: "default-ipv4-ippool", 6: "default-ipv6-ippool"}
FALLBACK_V4 = [f"172.{i}.0.0/16" for i in range(16, 32)]
_FALSE = ("false", "0", "no", "n", "f")
_MODES = {
    "": "Never",
    "off": "Never",
    "never": "Never",
    "crosssubnet": "CrossSubnet",
    "cross-subnet": "CrossSubnet",
    "always": "Always",
}


def env_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    """Upstream's lenient boolean: any set value except false/0/no/n/f is true."""
    if name not in env:
        return default
    return env[name].strip().lower() not in _FALSE


def _mode(env: Mapping[str, str], name: str, what: str) -> str:
    raw = env.get(name, "").strip()
    try:
        return _MODES[raw.lower()]
    except KeyError:
        raise NodeError(f"Unrecognized {what} mode specified in {name} '{raw}'") from None


def _block_size(env: Mapping[str, str], version: int) -> int:
    name = f"CALICO_IPV{version}POOL_BLOCK_SIZE"
    raw = env.get(name, "").strip()
    if not raw:
        return DEFAULT_BLOCK_SIZE[version]
    try:
        size = int(raw)
    except ValueError:
        raise NodeError(f"Unable to convert blocksize to int: {name}={raw!r}") from None
    low, high = BLOCK_SIZE_RANGE[version]
    if not low <= size <= high:
        raise NodeError(
            f"Invalid blocksize {size} for version {version} ({name}): must be {low}-{high}"
        )
    return size


def _node_selector(env: Mapping[str, str], version: int) -> str:
    name = f"CALICO_IPV{version}POOL_NODE_SELECTOR"
    raw = env.get(name, "").strip()
    if not raw:
        return "all()"
    try:
        v.selector_expression(raw)
    except ValueError as exc:
        raise NodeError(f"Invalid node selector '{raw}' for version {version}: {exc}") from None
    return raw


def generate_ipv6_ula() -> str:
    """A random RFC 4193 /48 (fdXX:XXXX:XXXX::/48), as upstream picks when none is given."""
    raw = bytes([0xFD]) + secrets.token_bytes(5) + bytes(10)
    return str(ipaddress.IPv6Network((raw, 48)))


def default_ipv4_cidr(host_addrs: Sequence[ipaddress.IPv4Address]) -> str:
    """192.168.0.0/16 unless a host address is inside it; then the first free 172.16-31/16."""
    for cand in [DEFAULT_IPV4_POOL_CIDR, *FALLBACK_V4]:
        net = ipaddress.ip_network(cand)
        if not any(a in net for a in host_addrs):
            return cand
    return DEFAULT_IPV4_POOL_CIDR


def ipv6_supported(env: Mapping[str, str], proc_path: str = "/proc/sys/net/ipv6") -> bool:
    return env_bool(env, "FELIX_IPV6SUPPORT", True) and os.path.exists(proc_path)


@dataclass(frozen=True)
class PoolPlan:
    """The default pools this node would create; empty when NO_DEFAULT_POOLS=true."""

    pools: tuple[Resource, ...]
    skipped: bool = False


def _build(version: int, cidr_text: str, env: Mapping[str, str]) -> Resource:
    cidr_env = f"CALICO_IPV{version}POOL_CIDR"
    try:
        net = ipaddress.ip_network(cidr_text, strict=False)
    except ValueError:
        net = None
    if net is None or net.version != version:
        raise NodeError(f"Invalid CIDR specified in {cidr_env} '{cidr_text}'")
    block = _block_size(env, version)
    selector = _node_selector(env, version)
    ipip = _mode(env, "CALICO_IPV4POOL_IPIP", "IPIP") if version == 4 else "Never"
    vxlan = _mode(env, f"CALICO_IPV{version}POOL_VXLAN", "VXLAN")
    spec = {
        "cidr": str(net),
        "ipipMode": ipip,
        "vxlanMode": vxlan,
        "natOutgoing": env_bool(env, f"CALICO_IPV{version}POOL_NAT_OUTGOING", version == 4),
        "blockSize": block,
        "nodeSelector": selector,
        "disableBGPExport": env_bool(env, f"CALICO_IPV{version}POOL_DISABLE_BGP_EXPORT", False),
    }
    doc = {
        "apiVersion": "projectcalico.org/v3",
        "kind": "IPPool",
        "metadata": {"name": POOL_NAME[version]},
        "spec": spec,
    }
    try:
        return parse_resource(doc)
    except APIError as exc:
        detail = str(exc).replace("\n", "; ")
        raise NodeError(f"invalid default IPv{version} pool from {cidr_env}: {detail}") from None


def plan_default_pools(
    env: Mapping[str, str],
    host_v4: Sequence[ipaddress.IPv4Address] = (),
    v6_supported: bool = True,
) -> PoolPlan:
    """Parse and validate the pool environment; raise NodeError on the first bad value."""
    v4 = env.get("CALICO_IPV4POOL_CIDR", "").strip()
    v6 = env.get("CALICO_IPV6POOL_CIDR", "").strip()
    if env.get("NO_DEFAULT_POOLS", "").strip().lower() == "true":
        if v4 or v6:
            raise NodeError(
                "Invalid configuration with NO_DEFAULT_POOLS defined and CALICO_IPV4POOL_CIDR "
                "or CALICO_IPV6POOL_CIDR defined"
            )
        return PoolPlan((), skipped=True)
    pools = []
    if v4 != "none":
        if not v4:
            v4 = default_ipv4_cidr(host_v4)
            log.info("Selected default IP pool is '%s'", v4)
        pools.append(_build(4, v4, env))
    if v6 != "none" and v6_supported:
        pools.append(_build(6, v6 or generate_ipv6_ula(), env))
    return PoolPlan(tuple(pools))


def ensure_default_pools(client: Client, plan: PoolPlan) -> list[str]:
    """Create each planned pool whose family has no pool yet; returns the names created."""
    if plan.skipped:
        log.info("Skipping IP pool configuration (NO_DEFAULT_POOLS=true)")
        return []
    present: set[int] = set()
    for pool in client.list("IPPool").items:
        try:
            present.add(ipaddress.ip_network(pool.spec.cidr, strict=False).version)  # type: ignore[attr-defined]
        except ValueError:
            log.warning("Error parsing CIDR of IPPool %s; skipping it", pool.metadata.name)
    created = []
    for pool in plan.pools:
        version = ipaddress.ip_network(pool.spec.cidr).version  # type: ignore[attr-defined]
        if version in present:
            log.info("An IPv%d pool already exists; not creating %s", version, pool.metadata.name)
            continue
        try:
            client.create(pool)
        except ResourceAlreadyExistsError:
            continue  # another node won the race
        except (APIError, DatastoreError) as exc:
            raise NodeError(f"failed to create default IPv{version} IP pool: {exc}") from None
        spec = pool.spec  # type: ignore[attr-defined]
        log.info(
            "Created default IPv%d pool (%s) with NAT outgoing %s. IPIP mode: %s, VXLAN mode: %s",
            version,
            spec.cidr,
            spec.nat_outgoing,
            spec.ipip_mode,
            spec.vxlan_mode,
        )
        created.append(pool.metadata.name)
    return created
