"""Which pools a request may draw from, and which addresses IPReservations hold back.

Pool choice is per request: the caller's explicit pools (names or CIDRs) or every pool, then
filtered by family, ``disabled``, ``allowedUses`` and ``nodeSelector``. The node selector is
evaluated against the Node resource's labels; when the host has no Node resource only pools
whose selector is exactly ``all()`` qualify (we cannot tell what labels it would have, so we
do not guess with an empty label set).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from calico.api.cluster import Node
from calico.api.ipam import IPPool
from calico.api.ipamalloc import IPReservation
from calico.datastore.client import Client
from calico.datastore.errors import ResourceDoesNotExistError
from calico.ipam.blocks import IPAddress, IPNetwork, overlap_ordinals
from calico.ipam.errors import IPAMError
from calico.selector import parse

WORKLOAD = "Workload"
TUNNEL = "Tunnel"
LOAD_BALANCER = "LoadBalancer"
HOST, VIRTUAL = "host", "virtual"  # block affinity types (``host:<node>``, ``virtual:<name>``)


@dataclass(frozen=True)
class Pool:
    name: str
    cidr: IPNetwork
    block_size: int
    node_selector: str
    disabled: bool
    allowed_uses: tuple[str, ...]

    @classmethod
    def from_resource(cls, res: IPPool) -> Pool:
        spec = res.spec
        return cls(
            res.metadata.name,
            ipaddress.ip_network(spec.cidr),
            spec.block_size,
            spec.node_selector or "all()",
            spec.disabled,
            tuple(spec.allowed_uses),
        )

    def selects(self, labels: dict[str, str] | None) -> bool:
        if labels is None:
            return parse(self.node_selector).canonical == parse("all()").canonical
        return parse(self.node_selector).evaluate(labels)


def list_pools(client: Client) -> list[Pool]:
    return [Pool.from_resource(p) for p in client.list(IPPool).items]  # type: ignore[arg-type]


def node_labels(client: Client, host: str) -> dict[str, str] | None:
    """The Node's labels, or None when there is no Node resource for ``host``."""
    try:
        node: Node = client.get(Node, host)  # type: ignore[assignment]
    except ResourceDoesNotExistError:
        return None
    return dict(node.metadata.labels or {})


def resolve_requested(pools: Sequence[Pool], requested: Iterable[str], version: int) -> list[Pool]:
    """Explicitly requested pools, by name or CIDR; each must exist and be enabled."""
    out: list[Pool] = []
    for want in requested:
        match = next((p for p in pools if p.name == want), None)
        if match is None:
            try:
                net = ipaddress.ip_network(want, strict=False)
            except ValueError:
                net = None
            match = next((p for p in pools if net is not None and p.cidr == net), None)
        if match is None:
            raise IPAMError(f"the given pool ({want}) does not exist")
        if match.disabled:
            raise IPAMError(f"the given pool ({want}) is disabled")
        if match.cidr.version != version:
            raise IPAMError(f"the given pool ({want}) is not an IPv{version} pool")
        out.append(match)
    return out


def usable_pools(
    pools: Sequence[Pool],
    version: int,
    labels: dict[str, str] | None,
    use: str = WORKLOAD,
    requested: Sequence[str] | None = None,
) -> list[Pool]:
    """Pools a request of family ``version`` and ``use`` may allocate from on this node."""
    chosen = resolve_requested(pools, requested, version) if requested else list(pools)
    return [
        p
        for p in chosen
        if p.cidr.version == version
        and not p.disabled
        and use in p.allowed_uses
        and p.selects(labels)
    ]


def pool_for_ip(pools: Sequence[Pool], ip: IPAddress) -> Pool | None:
    return next((p for p in pools if p.cidr.version == ip.version and ip in p.cidr), None)


class Reservations:
    """The union of every IPReservation's CIDRs; answers "which ordinals of this block"."""

    def __init__(self, nets: Iterable[IPNetwork] = ()) -> None:
        self.nets = list(nets)

    @classmethod
    def load(cls, client: Client) -> Reservations:
        nets: list[IPNetwork] = []
        for res in client.list(IPReservation).items:
            for cidr in res.spec.reserved_cidrs or []:  # type: ignore[attr-defined]
                nets.append(ipaddress.ip_network(cidr, strict=False))
        return cls(nets)

    def ordinals(self, block: IPNetwork) -> set[int]:
        return overlap_ordinals(block, self.nets)

    def covers(self, block: IPNetwork) -> bool:
        """True when every address of ``block`` is reserved (no point claiming it)."""
        return len(self.ordinals(block)) == block.num_addresses

    def count_in(self, net: IPNetwork) -> int:
        """How many addresses of ``net`` are reserved (overlapping reservations counted once)."""
        ranges = sorted(
            (
                max(int(n.network_address), int(net.network_address)),
                min(int(n.broadcast_address), int(net.broadcast_address)),
            )
            for n in self.nets
            if n.version == net.version and n.overlaps(net)
        )
        total, end = 0, -1
        for lo, hi in ranges:
            lo = max(lo, end + 1)
            if hi >= lo:
                total += hi - lo + 1
                end = hi
        return total
