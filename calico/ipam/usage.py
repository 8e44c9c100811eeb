"""Per-pool and per-block address counts (``calicoctl ipam show``).

In use counts every allocated ordinal, cooling ones included (they are not reusable yet);
reserved counts IPReservation addresses; free is what is neither. An address allocated before
it was reserved counts as both in use and reserved, as upstream, so the parts need not sum to
the total. Blocks outside every pool are reported under a pool entry with ``cidr=None``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from calico.datastore.client import Client
from calico.ipam.blocks import IPNetwork
from calico.ipam.pools import Reservations, list_pools
from calico.ipam.store import IPAMStore


@dataclass
class BlockUsage:
    cidr: IPNetwork
    capacity: int
    in_use: int
    reserved: int
    free: int
    cooling: int = 0


@dataclass
class PoolUsage:
    name: str
    cidr: IPNetwork | None  # None: blocks that belong to no pool
    capacity: int = 0
    in_use: int = 0
    reserved: int = 0
    free: int = 0
    cooling: int = 0
    blocks: list[BlockUsage] = field(default_factory=list)


def _block_usage(
    block_cidr: IPNetwork, allocations: list[int | None], cooling: int, reservations: Reservations
) -> BlockUsage:
    reserved = reservations.ordinals(block_cidr)
    in_use = sum(1 for a in allocations if a is not None)
    reserved_free = sum(1 for o in reserved if allocations[o] is None)
    free = block_cidr.num_addresses - in_use - reserved_free
    return BlockUsage(block_cidr, block_cidr.num_addresses, in_use, len(reserved), free, cooling)


def get_utilization(client: Client) -> list[PoolUsage]:
    """Usage of every pool (sorted by name, as listed), then of orphaned blocks."""
    reservations = Reservations.load(client)
    pools = list_pools(client)
    usage = [PoolUsage(p.name, p.cidr) for p in pools]
    orphans = PoolUsage("", None)
    for stored in sorted(IPAMStore(client).list_blocks(), key=lambda s: _sort_key(s.block.cidr)):
        b = stored.block
        bu = _block_usage(b.cidr, b.allocations, b.cooling(), reservations)
        owner = next(
            (
                u
                for u in usage
                if u.cidr is not None
                and u.cidr.version == b.cidr.version
                and b.cidr.subnet_of(u.cidr)
            ),  # type: ignore[arg-type]
            orphans,
        )
        owner.blocks.append(bu)
    for u in usage:
        assert u.cidr is not None
        u.capacity = u.cidr.num_addresses
        u.in_use = sum(b.in_use for b in u.blocks)
        u.cooling = sum(b.cooling for b in u.blocks)
        u.reserved = reservations.count_in(u.cidr)
        # Reserved addresses that are also allocated are already out of "free".
        reserved_in_use = sum(b.reserved - (b.capacity - b.in_use - b.free) for b in u.blocks)
        u.free = u.capacity - u.in_use - (u.reserved - reserved_in_use)
    if orphans.blocks:
        usage.append(orphans)
    return usage


def _sort_key(net: IPNetwork) -> tuple[int, int]:
    return net.version, int(net.network_address)
