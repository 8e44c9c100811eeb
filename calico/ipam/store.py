"""The allocator's records in the datastore, through the typed client.

Every IPAM write goes through here and is either a create (fails if someone got there first) or
an update carrying the resourceVersion that was read (compare-and-swap). The allocator loops on
the resulting conflicts; nothing in this module retries.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from calico.api.ipam import AllocationAttribute, IPAMBlock, IPAMBlockSpec
from calico.api.ipamalloc import (
    BlockAffinity,
    BlockAffinitySpec,
    IPAMConfiguration,
    IPAMHandle,
    IPAMHandleSpec,
)
from calico.datastore.client import Client
from calico.datastore.errors import ResourceDoesNotExistError
from calico.ipam.blocks import Attr, Block, IPNetwork, affinity_name, cidr_to_name


@dataclass
class Stored:
    """A value plus the resourceVersion it was read at (None = not stored yet)."""

    block: Block
    rv: str | None


def block_from_resource(res: IPAMBlock) -> Block:
    spec = res.spec
    net = ipaddress.ip_network(spec.cidr)
    allocations = list(spec.allocations) or [None] * net.num_addresses
    return Block(
        cidr=net,
        affinity=spec.affinity,
        allocations=allocations,
        unallocated=list(spec.unallocated),
        attributes=[
            Attr(a.handle_id, a.secondary, a.alternate, a.released_at) for a in spec.attributes
        ],
        sequence_number=spec.sequence_number,
        seq_for_alloc=dict(spec.sequence_number_for_allocation or {}),
        deleted=spec.deleted,
        strict_affinity=spec.strict_affinity,
        affinity_claim_time=spec.affinity_claim_time,
    )


def block_to_resource(block: Block, rv: str | None) -> IPAMBlock:
    spec = IPAMBlockSpec.model_construct(
        cidr=str(block.cidr),
        affinity=block.affinity,
        affinity_claim_time=block.affinity_claim_time,
        allocations=list(block.allocations),
        unallocated=list(block.unallocated),
        attributes=[
            AllocationAttribute.model_construct(
                handle_id=a.handle_id,
                secondary=a.secondary,
                alternate=a.alternate,
                released_at=a.released_at,
            )
            for a in block.attributes
        ],
        sequence_number=block.sequence_number,
        sequence_number_for_allocation=dict(block.seq_for_alloc),
        deleted=block.deleted,
        strict_affinity=block.strict_affinity,
    )
    res = IPAMBlock(spec=spec)
    res.metadata.name = cidr_to_name(block.cidr)
    res.metadata.resource_version = rv
    return res


def handle_name(handle_id: str) -> str:
    """Upstream stores a handle under its ID lower-cased (resource names are DNS-1123)."""
    return handle_id.lower()


class IPAMStore:
    """Typed get/list/create/CAS-update of blocks, affinities, handles and the config."""

    def __init__(self, client: Client) -> None:
        self.client = client

    # -- blocks ----------------------------------------------------------------------------

    def get_block(self, cidr: IPNetwork) -> Stored | None:
        try:
            res = self.client.get(IPAMBlock, cidr_to_name(cidr))
        except ResourceDoesNotExistError:
            return None
        return Stored(block_from_resource(res), res.metadata.resource_version)  # type: ignore[arg-type]

    def list_blocks(self) -> list[Stored]:
        return [
            Stored(block_from_resource(r), r.metadata.resource_version)  # type: ignore[arg-type]
            for r in self.client.list(IPAMBlock).items
        ]

    def create_block(self, block: Block) -> Stored:
        """Raises ResourceAlreadyExistsError when another writer created it first."""
        res = self.client.create(block_to_resource(block, None))
        return Stored(block, res.metadata.resource_version)

    def update_block(self, stored: Stored) -> Stored:
        """CAS write; bumps the block's sequence number as every write does upstream."""
        stored.block.sequence_number += 1
        res = self.client.update(block_to_resource(stored.block, stored.rv))
        return Stored(stored.block, res.metadata.resource_version)

    def delete_block(self, stored: Stored) -> None:
        self.client.delete(IPAMBlock, cidr_to_name(stored.block.cidr), resource_version=stored.rv)

    # -- affinities ------------------------------------------------------------------------

    def list_affinities(self, host: str | None = None) -> list[BlockAffinity]:
        # Names start with "<host>-": a prefix list narrows the scan (the node check stays,
        # since "node1-" is also a prefix of "node1-a-...").
        prefix = f"{host}-" if host is not None else ""
        items = self.client.list(BlockAffinity, name_prefix=prefix).items
        out = [a for a in items if not a.spec.deleted]  # type: ignore[attr-defined]
        if host is not None:
            out = [a for a in out if a.spec.node == host]  # type: ignore[attr-defined]
        return out  # type: ignore[return-value]

    def get_affinity(self, host: str, cidr: IPNetwork) -> BlockAffinity | None:
        try:
            return self.client.get(BlockAffinity, affinity_name(host, cidr))  # type: ignore[return-value]
        except ResourceDoesNotExistError:
            return None

    def create_affinity(
        self, host: str, cidr: IPNetwork, state: str, kind: str = "host"
    ) -> BlockAffinity:
        res = BlockAffinity(
            spec=BlockAffinitySpec(state=state, node=host, cidr=str(cidr), type=kind)
        )
        res.metadata.name = affinity_name(host, cidr)
        return self.client.create(res)  # type: ignore[return-value]

    def set_affinity_state(self, aff: BlockAffinity, state: str) -> BlockAffinity:
        spec = aff.spec.model_copy(update={"state": state})
        return self.client.update(aff.model_copy(update={"spec": spec}))  # type: ignore[return-value]

    def delete_affinity(self, aff: BlockAffinity) -> None:
        self.client.delete(
            BlockAffinity, aff.metadata.name, resource_version=aff.metadata.resource_version
        )

    # -- handles ---------------------------------------------------------------------------

    def get_handle(self, handle_id: str) -> IPAMHandle | None:
        try:
            return self.client.get(IPAMHandle, handle_name(handle_id))  # type: ignore[return-value]
        except ResourceDoesNotExistError:
            return None

    def list_handles(self) -> list[IPAMHandle]:
        return self.client.list(IPAMHandle).items  # type: ignore[return-value]

    def create_handle(self, handle_id: str, counts: dict[str, int]) -> IPAMHandle:
        res = IPAMHandle(spec=IPAMHandleSpec(handleID=handle_id, block=counts))
        res.metadata.name = handle_name(handle_id)
        return self.client.create(res)  # type: ignore[return-value]

    def update_handle(self, handle: IPAMHandle, counts: dict[str, int]) -> IPAMHandle:
        spec = handle.spec.model_copy(update={"block": counts})
        return self.client.update(handle.model_copy(update={"spec": spec}))  # type: ignore[return-value]

    def delete_handle(self, handle: IPAMHandle) -> None:
        self.client.delete(
            IPAMHandle, handle.metadata.name, resource_version=handle.metadata.resource_version
        )

    # -- configuration ---------------------------------------------------------------------

    def get_config(self) -> IPAMConfiguration | None:
        try:
            return self.client.get(IPAMConfiguration, "default")  # type: ignore[return-value]
        except ResourceDoesNotExistError:
            return None
