"""Pure block arithmetic: ordinals, the FIFO free queue, owner attributes, resource names.

A block is a fixed-size CIDR (default /26 or /122) whose addresses are indexed by ordinal.
Keeping this module free of I/O lets the allocator do every change as "read block, mutate a
copy here, compare-and-swap it back", and lets the tests drive it directly against a naive
oracle. Every address in a block is assignable: upstream does not hold back network or
broadcast addresses, because pod addresses are /32 (/128) routes, not subnets.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_NAME_LEN = 253


def cidr_to_name(cidr: str | IPNetwork) -> str:
    """Upstream's resource name for a CIDR: ``.``, ``:`` and ``/`` become ``-``."""
    text = str(ipaddress.ip_network(cidr, strict=False))
    return text.replace(".", "-").replace(":", "-").replace("/", "-")


def affinity_name(host: str, cidr: str | IPNetwork) -> str:
    """``<host>-<cidr name>``, shortened with a hash suffix when it would exceed 253 chars."""
    cidr_name = cidr_to_name(cidr)
    name = f"{host}-{cidr_name}"
    if len(name) < MAX_NAME_LEN:
        return name
    digest = hashlib.sha256(f"{host}+{cidr_name}".encode()).hexdigest()[:11]
    keep = MAX_NAME_LEN - 1 - len(cidr_name) - 13
    return f"{host[:keep]}-{cidr_name}-{digest}"


def ordinal_to_ip(net: IPNetwork, ordinal: int) -> IPAddress:
    if not 0 <= ordinal < net.num_addresses:
        raise ValueError(f"ordinal {ordinal} is outside {net}")
    return net.network_address + ordinal


def ip_to_ordinal(net: IPNetwork, ip: IPAddress) -> int:
    if ip.version != net.version or ip not in net:
        raise ValueError(f"{ip} is not in block {net}")
    return int(ip) - int(net.network_address)


def block_cidr_for(ip: IPAddress, block_size: int) -> IPNetwork:
    """The block of prefix ``block_size`` that contains ``ip``."""
    return ipaddress.ip_network(f"{ip}/{block_size}", strict=False)


def overlap_ordinals(net: IPNetwork, others: Iterable[IPNetwork]) -> set[int]:
    """Ordinals of ``net`` covered by any of ``others`` (used for IPReservations)."""
    base, last = int(net.network_address), int(net.broadcast_address)
    out: set[int] = set()
    for other in others:
        if other.version != net.version:
            continue
        lo = max(base, int(other.network_address))
        hi = min(last, int(other.broadcast_address))
        if lo <= hi:
            out.update(range(lo - base, hi - base + 1))
    return out


def host_seed(host: str) -> int:
    """A stable per-host number: the same host walks blocks in the same order every time."""
    return int.from_bytes(hashlib.sha256(host.encode()).digest()[:8], "big")


def block_walk(pool: IPNetwork, block_size: int, host: str) -> Iterator[IPNetwork]:
    """Every block of ``pool``, starting at a host-seeded offset and wrapping around.

    Lazy, so an IPv6 pool with 2**58 blocks costs nothing until walked; the host seed makes
    competing hosts start at different places instead of fighting over the first block.
    """
    count = 1 << (block_size - pool.prefixlen)
    step = 1 << (pool.max_prefixlen - block_size)
    start = host_seed(f"{host}|{pool}") % count
    base = int(pool.network_address)
    cls = type(pool)
    for i in range(count):
        index = (start + i) % count
        yield cls((base + index * step, block_size))


def walk_position(pool: IPNetwork, block: IPNetwork, host: str) -> int:
    """Where ``block`` comes in :func:`block_walk` for ``host`` (orders borrow candidates)."""
    count = 1 << (block.prefixlen - pool.prefixlen)
    step = 1 << (pool.max_prefixlen - block.prefixlen)
    index = (int(block.network_address) - int(pool.network_address)) // step
    start = host_seed(f"{host}|{pool}") % count
    return (index - start) % count


@dataclass
class Attr:
    """One owner record; allocations point at these by index."""

    handle_id: str | None = None
    secondary: dict[str, str] | None = None
    alternate: dict[str, str] | None = None
    released_at: str | None = None


@dataclass
class Block:
    """A mutable working copy of an IPAMBlock spec."""

    cidr: IPNetwork
    affinity: str | None = None
    allocations: list[int | None] = field(default_factory=list)
    unallocated: list[int] = field(default_factory=list)
    attributes: list[Attr] = field(default_factory=list)
    sequence_number: int = 0
    seq_for_alloc: dict[str, int] = field(default_factory=dict)
    deleted: bool = False
    strict_affinity: bool = False
    affinity_claim_time: str | None = None

    @classmethod
    def new(cls, cidr: IPNetwork, affinity: str | None = None) -> Block:
        size = cidr.num_addresses
        return cls(cidr, affinity, [None] * size, list(range(size)))

    @property
    def size(self) -> int:
        return self.cidr.num_addresses

    # -- queries ---------------------------------------------------------------------------

    def ip(self, ordinal: int) -> IPAddress:
        return ordinal_to_ip(self.cidr, ordinal)

    def ordinal(self, ip: IPAddress) -> int:
        return ip_to_ordinal(self.cidr, ip)

    def attr_of(self, ordinal: int) -> Attr | None:
        idx = self.allocations[ordinal]
        return None if idx is None else self.attributes[idx]

    def is_cooling(self, ordinal: int) -> bool:
        attr = self.attr_of(ordinal)
        return attr is not None and attr.released_at is not None

    def in_use(self) -> int:
        """Allocated ordinals, cooling ones included (they are not reusable yet)."""
        return sum(1 for a in self.allocations if a is not None)

    def cooling(self) -> int:
        return sum(1 for o in range(self.size) if self.is_cooling(o))

    def free(self) -> int:
        return len(self.unallocated)

    def is_empty(self) -> bool:
        return all(a is None for a in self.allocations)

    def ordinals_for_handle(self, handle_id: str) -> list[int]:
        return [
            o
            for o, idx in enumerate(self.allocations)
            if idx is not None
            and self.attributes[idx].handle_id == handle_id
            and self.attributes[idx].released_at is None
        ]

    def host(self) -> str | None:
        """The node a ``host:<node>`` affinity names (None for virtual or no affinity)."""
        if self.affinity and self.affinity.startswith("host:"):
            return self.affinity[5:]
        return None

    def seq_of(self, ordinal: int) -> int:
        return self.seq_for_alloc.get(str(ordinal), 0)

    # -- mutations -------------------------------------------------------------------------

    def _attr_index(self, attr: Attr) -> int:
        for i, existing in enumerate(self.attributes):
            if existing == attr:
                return i
        self.attributes.append(attr)
        return len(self.attributes) - 1

    def allocate(
        self,
        num: int,
        handle_id: str | None,
        secondary: dict[str, str] | None = None,
        skip: set[int] | frozenset[int] = frozenset(),
    ) -> list[int]:
        """Take up to ``num`` ordinals from the head of the free queue, skipping ``skip``.

        Skipped (reserved) ordinals keep their place in the queue.
        """
        taken: list[int] = []
        kept: list[int] = []
        queue = self.unallocated
        i = 0
        while i < len(queue) and len(taken) < num:
            ordinal = queue[i]
            (kept if ordinal in skip else taken).append(ordinal)
            i += 1
        if not taken:
            return []
        self.unallocated = kept + queue[i:]
        idx = self._attr_index(Attr(handle_id, dict(secondary) if secondary else None))
        for ordinal in taken:
            self.allocations[ordinal] = idx
            self.seq_for_alloc[str(ordinal)] = self.sequence_number
        return taken

    def assign(
        self, ordinal: int, handle_id: str | None, secondary: dict[str, str] | None = None
    ) -> bool:
        """Allocate one specific ordinal; False if it is not free."""
        if self.allocations[ordinal] is not None:
            return False
        self.unallocated.remove(ordinal)
        idx = self._attr_index(Attr(handle_id, dict(secondary) if secondary else None))
        self.allocations[ordinal] = idx
        self.seq_for_alloc[str(ordinal)] = self.sequence_number
        return True

    def release(
        self, ordinals: Iterable[int], now: str, sequence: dict[int, int] | None = None
    ) -> tuple[list[int], list[int], dict[int, str | None]]:
        """Mark ordinals released (stamped ``releasedAt``); :meth:`collect` frees them later.

        Returns (released, not allocated, handle of each released ordinal). An ordinal whose
        stored sequence number differs from ``sequence[ordinal]`` was reallocated since the
        caller looked: raises :class:`BadSequenceNumber` and changes nothing.
        """
        ordinals = list(dict.fromkeys(ordinals))
        for o in ordinals:
            stale = sequence and o in sequence and self.allocations[o] is not None
            if stale and self.seq_of(o) != sequence[o]:  # type: ignore[index]
                raise BadSequenceNumber(self.ip(o), sequence[o], self.seq_of(o))
        released: list[int] = []
        missing: list[int] = []
        handles: dict[int, str | None] = {}
        for o in ordinals:
            attr = self.attr_of(o)
            if attr is None:
                missing.append(o)
                continue
            if attr.released_at is not None:
                continue  # already cooling: releasing again is a no-op, not an error
            handles[o] = attr.handle_id
            cooled = Attr(None, attr.secondary, attr.alternate, now)
            self.attributes.append(cooled)
            self.allocations[o] = len(self.attributes) - 1
            released.append(o)
        self._prune_attributes()
        return released, missing, handles

    def collect(self, now: datetime, cooldown_seconds: float) -> list[int]:
        """Return cooled-down ordinals to the tail of the free queue (oldest release first)."""
        # Sort by release time, then attribute index: release appends one attribute per
        # ordinal, so ties (one release call) keep the order the caller released them in.
        due: list[tuple[str, int, int]] = []
        for o, idx in enumerate(self.allocations):
            if idx is None or self.attributes[idx].released_at is None:
                continue
            stamp = self.attributes[idx].released_at or ""
            released = parse_time(stamp)
            if released is None or (now - released).total_seconds() >= cooldown_seconds:
                due.append((stamp, idx, o))
        if not due:
            return []
        freed = [o for _, _, o in sorted(due)]
        for o in freed:
            self.allocations[o] = None
            self.seq_for_alloc.pop(str(o), None)
            self.unallocated.append(o)
        self._prune_attributes()
        return freed

    def _prune_attributes(self) -> None:
        """Drop attributes no allocation points at, renumbering the rest."""
        used = sorted({i for i in self.allocations if i is not None})
        if len(used) == len(self.attributes):
            return
        remap = {old: new for new, old in enumerate(used)}
        self.attributes = [self.attributes[i] for i in used]
        self.allocations = [None if i is None else remap[i] for i in self.allocations]


class BadSequenceNumber(Exception):
    """A release named an allocation that has since been freed and handed out again."""

    def __init__(self, ip: IPAddress, expected: int, stored: int) -> None:
        super().__init__(
            f"release of {ip} refused: sequence number {expected} does not match the "
            f"current allocation's {stored}"
        )
        self.ip = ip


def format_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime | None:
    for fmt in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None
