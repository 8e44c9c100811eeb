"""IPAM kinds only the allocator, confd and calicoctl read: IPReservation and
IPAMConfiguration (cluster-wide allocator settings), IPAMHandle and BlockAffinity (the
allocator's own records, with upstream's exact wire names). Kept apart from ``calico.api.ipam``
so a Felix start, which reads pools and blocks only, does not define them."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from calico.api import validators as v
from calico.api.base import CalicoModel, Resource, SingletonResource, register


def _reserved_cidr(value: str) -> str:
    return v.cidr(value)


class IPReservationSpec(CalicoModel):
    """Addresses (CIDRs or bare IPs) IPAM must never hand out."""

    reserved_cidrs: list[Annotated[str, AfterValidator(_reserved_cidr)]] | None = Field(
        default=None, alias="reservedCIDRs"
    )

    @field_validator("reserved_cidrs")
    @classmethod
    def _unique(cls, cidrs: list[str] | None) -> list[str] | None:
        if cidrs is not None and len(set(cidrs)) != len(cidrs):
            raise ValueError("reservedCIDRs must not contain duplicates")
        return cidrs


@register
class IPReservation(Resource):
    KIND: ClassVar[str] = "IPReservation"

    kind: str = "IPReservation"
    spec: IPReservationSpec = Field(default_factory=IPReservationSpec)


class IPAMConfigurationSpec(CalicoModel):
    """Cluster-wide allocator switches (``calicoctl ipam configure``)."""

    strict_affinity: bool = False
    auto_allocate_blocks: bool = True
    max_blocks_per_host: Annotated[int, Field(ge=0, le=1000000)] = 0
    kube_virt_vm_address_persistence: Literal["Enabled", "Disabled"] | None = Field(
        default=None, alias="kubeVirtVMAddressPersistence"
    )
    ip_cooldown_seconds: Annotated[int, Field(ge=0, le=1200)] | None = Field(
        default=None, alias="ipCooldownSeconds"
    )

    @model_validator(mode="after")
    def _combination(self) -> IPAMConfigurationSpec:
        if not self.strict_affinity and not self.auto_allocate_blocks:
            v.raise_at(
                ("autoAllocateBlocks",),
                "autoAllocateBlocks cannot be false when strictAffinity is false",
                False,
            )
        if self.max_blocks_per_host > 0 and not self.strict_affinity:
            v.raise_at(
                ("maxBlocksPerHost",),
                "maxBlocksPerHost can only be set when strictAffinity is true",
                self.max_blocks_per_host,
            )
        return self


@register
class IPAMConfiguration(SingletonResource):
    KIND: ClassVar[str] = "IPAMConfiguration"

    kind: str = "IPAMConfiguration"
    spec: IPAMConfigurationSpec = Field(default_factory=IPAMConfigurationSpec)


class IPAMHandleSpec(CalicoModel):
    """How many addresses a handle holds in each block (keyed by block CIDR)."""

    handle_id: str = Field(alias="handleID")
    block: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    deleted: bool = False


@register
class IPAMHandle(Resource):
    KIND: ClassVar[str] = "IPAMHandle"

    kind: str = "IPAMHandle"
    spec: IPAMHandleSpec


def _bool_or_string(value: object) -> object:
    """Older releases stored ``deleted`` as the string "true"/"false"; accept both."""
    if isinstance(value, str) and value.lower() in ("true", "false", ""):
        return value.lower() == "true"
    return value


class BlockAffinitySpec(CalicoModel):
    """A node's claim on a block; pending until the block exists, then confirmed."""

    state: Literal["", "confirmed", "pending", "pendingDeletion"] = ""
    node: str
    cidr: Annotated[str, AfterValidator(lambda s: v.cidr(s, strict=True))]
    deleted: Annotated[bool, BeforeValidator(_bool_or_string)] = False
    type: str | None = None


@register
class BlockAffinity(Resource):
    KIND: ClassVar[str] = "BlockAffinity"

    kind: str = "BlockAffinity"
    spec: BlockAffinitySpec
