"""v1 IPAM values: IP pools (Felix routes/encap, confd filters), allocation blocks (Felix
routes) and block affinities (confd's per-node aggregation)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from calico.model.values.codec import (
    V1Value,
    flag,
    integer,
    items,
    numbers,
    opt_text,
    raw,
    string_map,
    text,
    texts,
)


@dataclass(frozen=True, slots=True)
class IPPool(V1Value):
    """``/calico/v1/ipam/v4|v6/pool/<cidr>``. Encapsulation modes use the v1 spelling
    (``always``, ``cross-subnet``, ``never``); ``ipip`` names the tunnel device when IPIP is on;
    ``ipam`` means "addresses may be allocated from it"."""

    cidr: str = text("cidr")
    ipip: str = text("ipip")
    ipip_mode: str = text("ipip_mode")
    vxlan_mode: str = text("vxlan_mode")
    masquerade: bool = flag("masquerade")
    ipam: bool = flag("ipam")
    disabled: bool = flag("disabled")
    disable_bgp_export: bool = flag("disableBGPExport")
    assignment_mode: str = text("assignment_mode")
    allowed_uses: tuple[str, ...] = texts("allowed_uses", nil=[])


@dataclass(frozen=True, slots=True)
class AllocationAttribute(V1Value):
    """Who owns an allocation: the handle and the owner's attributes (``node``, ``pod``...)."""

    handle_id: str | None = opt_text("handle_id", omitempty=True)
    secondary: Mapping[str, str] = string_map("secondary")
    alternate: Mapping[str, str] = string_map("alternate")
    released_at: str | None = opt_text("releasedAt", omitempty=True)


@dataclass(frozen=True, slots=True)
class AllocationBlock(V1Value):
    """``/calico/ipam/v2/assignment/ipv4|ipv6/block/<cidr>``. ``allocations[ordinal]`` is the
    index of the owning attribute, or None when the address is free."""

    cidr: str = text("cidr")
    affinity: str | None = opt_text("affinity", omitempty=True)
    affinity_claim_time: str | None = opt_text("affinityClaimTime", omitempty=True)
    strict_affinity: bool = flag("strictAffinity")
    allocations: tuple[int | None, ...] = numbers("allocations", nullable=True, nil=[])
    unallocated: tuple[int, ...] = numbers("unallocated", nil=[])
    attributes: tuple[AllocationAttribute, ...] = items("attributes", AllocationAttribute, nil=[])
    deleted: bool = flag("deleted")
    sequence_number: int = integer("sequenceNumber")
    sequence_number_for_allocation: Any = raw("sequenceNumberForAllocation")


@dataclass(frozen=True, slots=True)
class BlockAffinity(V1Value):
    """``/calico/ipam/v2/host/<host>/ipv4|ipv6/block/<cidr>``: the host's claim on a block."""

    state: str = text("state")
    deleted: bool = flag("deleted")
