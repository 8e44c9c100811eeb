"""IPAM resources Felix reads: IPPool and the allocator's IPAMBlock.

Pools are user-facing and validated strictly (block size ranges, encapsulation rules). Blocks
are written by the allocator, so they are validated for shape rather than policy, and keep
upstream's exact (partly snake_case) wire names. IPReservation, IPAMConfiguration, IPAMHandle and
BlockAffinity, which only the allocator, confd and calicoctl read, live in
``calico.api.ipamalloc``; their names still resolve here (PEP 562), as they were defined here
before.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from calico.api import validators as v
from calico.api.base import CalicoModel, Resource, register
from calico.api.conditions import Condition
from calico.api.fieldtypes import Selector
from calico.api.reexport import moved_attributes

DEFAULT_BLOCK_SIZE = {4: 26, 6: 122}
BLOCK_SIZE_RANGE = {4: (20, 32), 6: (116, 128)}
LINK_LOCAL = {4: ipaddress.ip_network("169.254.0.0/16"), 6: ipaddress.ip_network("fe80::/10")}

EncapMode = Literal["Never", "Always", "CrossSubnet"]
AllowedUse = Literal["Workload", "Tunnel", "LoadBalancer"]


def _pool_cidr(value: str) -> str:
    v.cidr(value, strict=True)
    net = ipaddress.ip_network(value)
    ll = LINK_LOCAL[net.version]
    if net.overlaps(ll):
        raise ValueError(f"IP pool CIDR {value} overlaps with the link-local range {ll}")
    return value


class IPIPConfiguration(CalicoModel):
    """The deprecated v1 ``ipip`` block; accepted on input only so it can be rejected clearly."""

    enabled: bool | None = None
    mode: str | None = None


class IPPoolSpec(CalicoModel):
    """An address range workloads, tunnels or load balancers are assigned from.

    ``blockSize`` defaults from the CIDR's family; ``nodeSelector``, ``allowedUses`` and the
    encapsulation modes get upstream's defaults so stored pools are always complete.
    """

    cidr: Annotated[str, AfterValidator(_pool_cidr)]
    vxlan_mode: EncapMode = "Never"
    ipip_mode: EncapMode = Field(default="Never", alias="ipipMode")
    nat_outgoing: bool = False
    disabled: bool = False
    disable_bgp_export: bool = Field(default=False, alias="disableBGPExport")
    block_size: int = 0
    node_selector: Selector = "all()"
    namespace_selector: Selector | None = None
    allowed_uses: list[AllowedUse] = Field(default_factory=lambda: ["Workload", "Tunnel"])
    assignment_mode: Literal["Automatic", "Manual"] = "Automatic"
    # Deprecated v1 fields: upstream keeps them in the schema but refuses any value.
    ipip: IPIPConfiguration | None = None
    nat_outgoing_v1: bool | None = Field(default=None, alias="nat-outgoing")

    @field_validator("allowed_uses")
    @classmethod
    def _uses(cls, uses: list[str]) -> list[str]:
        if len(set(uses)) != len(uses):
            raise ValueError("allowedUses must not contain duplicates")
        if "LoadBalancer" in uses and len(uses) > 1:
            raise ValueError("allowedUses: LoadBalancer cannot be combined with Workload or Tunnel")
        return uses

    @model_validator(mode="after")
    def _pool_rules(self) -> IPPoolSpec:
        net = ipaddress.ip_network(self.cidr)
        if self.ipip is not None:
            v.raise_at(("ipip",), "ipip is a deprecated v1 field and must not be set; use ipipMode")
        if self.nat_outgoing_v1:
            v.raise_at(
                ("nat-outgoing",),
                "nat-outgoing is a deprecated v1 field and must not be set; use natOutgoing",
                True,
            )
        if not self.block_size:
            self.block_size = DEFAULT_BLOCK_SIZE[net.version]
        low, high = BLOCK_SIZE_RANGE[net.version]
        if not low <= self.block_size <= high:
            v.raise_at(
                ("blockSize",),
                f"blockSize {self.block_size} is out of range {low}-{high} "
                f"for an IPv{net.version} pool",
                self.block_size,
            )
        if net.prefixlen > self.block_size:
            v.raise_at(
                ("cidr",),
                "IP pool size is too small for use with Calico IPAM. It must be equal to or "
                "greater than the block size.",
                str(net),
            )
        if self.ipip_mode != "Never" and net.version == 6:
            v.raise_at(("ipipMode",), "IPIP is not supported on an IPv6 pool", self.ipip_mode)
        if self.ipip_mode != "Never" and self.vxlan_mode != "Never":
            v.raise_at(
                ("vxlanMode",),
                "ipipMode and vxlanMode cannot both be enabled on the same pool",
                self.vxlan_mode,
            )
        if self.allowed_uses == ["LoadBalancer"] and (
            self.ipip_mode != "Never" or self.vxlan_mode != "Never"
        ):
            v.raise_at(
                ("allowedUses",),
                "a LoadBalancer pool cannot use IPIP or VXLAN encapsulation",
            )
        return self


class IPPoolStatus(CalicoModel):
    """Written by kube-controllers' IP pool controller (status subresource): upstream's
    ``Allocatable`` condition, with reasons OK, PoolDisabled, CIDROverlap or Terminating."""

    conditions: list[Condition] | None = None


@register
class IPPool(Resource):
    KIND: ClassVar[str] = "IPPool"

    kind: str = "IPPool"
    spec: IPPoolSpec
    status: IPPoolStatus | None = None


# --- Allocator records ------------------------------------------------------------------------


class AllocationAttribute(CalicoModel):
    """Who owns an allocation: the handle plus owner attributes (namespace, pod, node...)."""

    handle_id: str | None = Field(default=None, alias="handle_id")
    secondary: dict[str, str] | None = Field(default=None, alias="secondary")
    # The other owner during a live migration (source or target pod); upstream's v3 name.
    alternate: dict[str, str] | None = Field(default=None, alias="alternateOwnerAttrs")
    # When the IP was released, for the cooldown (ipCooldownSeconds).
    released_at: str | None = Field(default=None, alias="releasedAt")


_AFFINITY = r"^(host|virtual):[a-zA-Z0-9\.\-_]+$"


class IPAMBlockSpec(CalicoModel):
    """One block: ordinal-indexed allocations, a FIFO free list, owner attributes."""

    cidr: Annotated[str, AfterValidator(lambda s: v.cidr(s, strict=True))]
    affinity: Annotated[str, Field(pattern=_AFFINITY)] | None = None
    affinity_claim_time: str | None = None
    allocations: list[int | None] = Field(default_factory=list)
    unallocated: list[int] = Field(default_factory=list)
    attributes: list[AllocationAttribute] = Field(default_factory=list)
    sequence_number: Annotated[int, Field(ge=0)] = 0
    sequence_number_for_allocation: dict[str, int] | None = None
    deleted: bool = False
    strict_affinity: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> IPAMBlockSpec:
        size = ipaddress.ip_network(self.cidr).num_addresses
        if self.allocations and len(self.allocations) != size:
            v.raise_at(
                ("allocations",),
                f"allocations has {len(self.allocations)} entries; a {self.cidr} block "
                f"needs {size}",
            )
        for i, ordinal in enumerate(self.unallocated):
            if not 0 <= ordinal < size:
                v.raise_at(
                    ("unallocated", i),
                    f"ordinal {ordinal} is outside the block (0-{size - 1})",
                    ordinal,
                )
        for i, attr_index in enumerate(self.allocations):
            if attr_index is not None and not 0 <= attr_index < len(self.attributes):
                v.raise_at(
                    ("allocations", i),
                    f"attribute index {attr_index} does not exist "
                    f"(the block has {len(self.attributes)} attributes)",
                    attr_index,
                )
        return self


@register
class IPAMBlock(Resource):
    KIND: ClassVar[str] = "IPAMBlock"

    kind: str = "IPAMBlock"
    spec: IPAMBlockSpec


# Defined in calico.api.ipamalloc, imported on first use (kinds Felix never reads).
_MOVED = dict.fromkeys(
    (
        "IPReservationSpec",
        "IPReservation",
        "IPAMConfigurationSpec",
        "IPAMConfiguration",
        "IPAMHandleSpec",
        "IPAMHandle",
        "BlockAffinitySpec",
        "BlockAffinity",
    ),
    "calico.api.ipamalloc",
)


__getattr__ = moved_attributes(globals(), _MOVED)
