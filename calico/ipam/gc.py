"""Garbage collection: leaked addresses, leaked handles, empty blocks of deleted nodes.

IPAM cannot know on its own whether a workload still exists, so the caller supplies that as a
predicate (kube-controllers asks Kubernetes; tests pass a set). Addresses are released with
their handle and sequence number, so an address freed and handed to a new workload between the
scan and the release is left alone. Node deletion is judged by the Node resource: a host with
no Node loses its affinities, and its blocks are deleted once empty.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Callable
from dataclasses import dataclass, field

from calico.api.cluster import Node
from calico.datastore.errors import ResourceDoesNotExistError, UpdateConflictError
from calico.ipam.allocator import IPAMClient, ReleaseOptions
from calico.ipam.blocks import BadSequenceNumber
from calico.ipam.pools import HOST

# (handle_id, owner attributes) -> is the owner still alive?
HandleInUse = Callable[[str, dict[str, str]], bool]

# Tunnel addresses belong to nodes, not workloads: never judged by the workload predicate.
TUNNEL_PREFIXES = (
    "ipip-tunnel-addr-",
    "vxlan-tunnel-addr-",
    "vxlan-v6-tunnel-addr-",
    "wireguard-tunnel-addr-",
    "wireguard-v6-tunnel-addr-",
)


@dataclass
class GCResult:
    released_ips: list[str] = field(default_factory=list)
    deleted_handles: list[str] = field(default_factory=list)
    released_affinities: list[str] = field(default_factory=list)  # "<node>/<cidr>"
    deleted_blocks: list[str] = field(default_factory=list)


def garbage_collect(
    ipam: IPAMClient,
    handle_in_use: HandleInUse,
    node_exists: Callable[[str], bool] | None = None,
) -> GCResult:
    """One GC pass. ``node_exists`` defaults to "a Node resource of that name exists"."""
    exists = node_exists or _node_resource_exists(ipam)
    result = GCResult()
    _release_leaked(ipam, handle_in_use, exists, result)
    _delete_leaked_handles(ipam, result)
    _release_dead_affinities(ipam, exists, result)
    return result


def _node_resource_exists(ipam: IPAMClient) -> Callable[[str], bool]:
    names = {n.metadata.name for n in ipam.client.list(Node).items}
    return names.__contains__


def _release_leaked(
    ipam: IPAMClient,
    handle_in_use: HandleInUse,
    node_exists: Callable[[str], bool],
    result: GCResult,
) -> None:
    leaked: list[ReleaseOptions] = []
    for stored in ipam.store.list_blocks():
        block = stored.block
        for ordinal in range(block.size):
            attr = block.attr_of(ordinal)
            if attr is None or attr.released_at is not None or attr.handle_id is None:
                continue
            owner = dict(attr.secondary or {})
            if attr.handle_id.startswith(TUNNEL_PREFIXES):
                alive = node_exists(owner.get("node", "")) if owner.get("node") else True
            else:
                alive = handle_in_use(attr.handle_id, owner)
            if not alive:
                leaked.append(
                    ReleaseOptions(str(block.ip(ordinal)), attr.handle_id, block.seq_of(ordinal))
                )
    for opt in leaked:
        try:
            if not ipam.release_ips([opt]):
                result.released_ips.append(opt.address)
        except BadSequenceNumber:
            continue  # reallocated since the scan: not leaked any more


def _delete_leaked_handles(ipam: IPAMClient, result: GCResult) -> None:
    """Handles whose counted blocks hold none of their addresses (e.g. a crash mid-assign)."""
    referenced: set[str] = set()
    for stored in ipam.store.list_blocks():
        for attr in stored.block.attributes:
            if attr.handle_id is not None and attr.released_at is None:
                referenced.add(attr.handle_id)
    for handle in ipam.store.list_handles():
        if handle.spec.handle_id in referenced:
            continue
        with contextlib.suppress(UpdateConflictError, ResourceDoesNotExistError):
            ipam.store.delete_handle(handle)
            result.deleted_handles.append(handle.spec.handle_id)


def _release_dead_affinities(
    ipam: IPAMClient, node_exists: Callable[[str], bool], result: GCResult
) -> None:
    cfg = ipam.get_ipam_config()
    now = ipam.clock()
    for aff in ipam.store.list_affinities():
        node = aff.spec.node
        if (aff.spec.type or HOST) != HOST or node_exists(node):
            continue  # a virtual affinity (LoadBalancer addresses) names no node
        cidr = aff.spec.cidr
        if ipam.release_affinity(cidr, node, require_empty=True):
            result.released_affinities.append(f"{node}/{cidr}")
    # Blocks still naming a deleted host without an affinity record (or whose affinity was
    # just released but the block was not empty then) are deleted once they are empty.
    for stored in ipam.store.list_blocks():
        host = stored.block.host()
        if host is None or node_exists(host):
            continue
        stored.block.collect(now, float(cfg.ip_cooldown_seconds or 0))
        if not stored.block.is_empty():
            continue
        if ipam.store.get_affinity(host, stored.block.cidr) is not None:
            continue
        with contextlib.suppress(UpdateConflictError, ResourceDoesNotExistError):
            ipam.store.delete_block(stored)
            result.deleted_blocks.append(str(ipaddress.ip_network(stored.block.cidr)))
