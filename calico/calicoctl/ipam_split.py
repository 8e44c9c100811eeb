"""``calicoctl ipam split``: replace an IP pool by 2^k equal, smaller pools.

Upstream's procedure, on a locked datastore (``datastore migrate lock``, so no allocation
races the change): disable the pool, create the children (copies of the pool with the CIDR
and name changed, ``split-<name>-<i>``) without the overlap check, since they overlap the pool
they replace, then delete the pool. Blocks and allocations are untouched: they lie inside
exactly one child because every child is at least as large as a block.

Where this differs from upstream, on purpose: the number and the children are checked before
anything is written (upstream disables the pool first, so a bad number leaves it disabled),
a split into 0 pools is refused (upstream's check lets 0 through and deletes the pool), and
the success message ends its lines. See design/calicoctl.md "ipam split".
"""

from __future__ import annotations

import ipaddress
import re

import click
from pydantic import ValidationError

from calico.api import Resource
from calico.api.base import ObjectMeta
from calico.calicoctl.errors import CtlError
from calico.calicoctl.migrate import is_locked
from calico.datastore.client import Client
from calico.datastore.errors import DatastoreError

_GO_INT = re.compile(r"[+-]?[0-9]+")
_MAX_NAME = 253


def parse_count(text: str) -> int:
    """The ``<NUMBER>`` argument, read as Go's strconv.Atoi reads it."""
    if not _GO_INT.fullmatch(text):
        reason = f'strconv.Atoi: parsing "{text}": invalid syntax'
    elif not -(2**63) <= int(text) < 2**63:
        reason = f'strconv.Atoi: parsing "{text}": value out of range'
    else:
        return int(text)
    raise CtlError(
        f"error reading number to split IP pools into. {text} is not a valid number: {reason}"
    )


def split_cidr(cidr: str, parts: int) -> list[str]:
    """``cidr`` cut into ``parts`` equal, consecutive networks (``parts`` a power of two > 1)."""
    if parts < 2 or parts & (parts - 1):
        raise ValueError(f"number to split CIDR into is not a valid power of 2: {parts}")
    try:
        net = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        raise ValueError(f"error reading CIDR {cidr} before attempting to split it") from None
    power = parts.bit_length() - 1
    if net.prefixlen + power > net.max_prefixlen:
        raise ValueError(f"the CIDR {cidr} is not large enough to be split into {parts} parts")
    return [str(child) for child in net.subnets(prefixlen_diff=power)]


def child_name(parent: str, index: int) -> str:
    name = f"split-{parent}-{index}"
    if len(name) > _MAX_NAME:
        name = f"split-{parent[:245]}-{index}"
    return name


def find_pool(client: Client, cidr: str | None, name: str | None) -> Resource:
    """The pool named ``name``, else the one whose spec.cidr is exactly ``cidr``."""
    if name:
        try:
            return client.get("IPPool", name)
        except DatastoreError as exc:
            raise CtlError(f"unable to find IP pool with name {name}: {exc}") from None
    try:
        pools = client.list("IPPool").items
    except DatastoreError:
        raise CtlError(f"unable to list IP pools to find the pool specified by {cidr}") from None
    found = [p for p in pools if p.spec.cidr == cidr]  # type: ignore[attr-defined]
    if not found:
        raise CtlError(f"unable to find IP pool {name or ''} covering the specified CIDR {cidr}")
    return found[-1]


def _children(pool: Resource, cidrs: list[str]) -> list[Resource]:
    """The new pools: copies of ``pool`` with fresh identity, a child CIDR and enabled."""
    meta = pool.metadata
    out = []
    for i, cidr in enumerate(cidrs):
        fresh = ObjectMeta(
            name=child_name(meta.name, i),
            labels=meta.labels,
            annotations=meta.annotations,
            finalizers=meta.finalizers,
            owner_references=meta.owner_references,
        )
        wire = pool.model_copy(update={"metadata": fresh}).to_wire()
        wire["spec"].update(cidr=cidr, disabled=False)
        try:
            out.append(type(pool).model_validate(wire))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
                for e in exc.errors()
            )
            raise CtlError(
                f"error splitting the CIDR {pool.spec.cidr} into {len(cidrs)} CIDRs: "  # type: ignore[attr-defined]
                f"{problems}"
            ) from None
    return out


def split_pool(client: Client, cidr: str | None, name: str | None, parts: int) -> list[Resource]:
    """Split the pool given by ``name`` or ``cidr`` into ``parts`` pools; returns them."""
    if not cidr and not name:
        raise CtlError(
            "no name or CIDR provided. Provide a name or CIDR to denote the IP pool to split"
        )
    if not is_locked(client):
        raise CtlError(
            "datastore is not locked. Run the `calicoctl datastore migrate lock` command in "
            "order split the IP pools"
        )
    pool = find_pool(client, cidr, name)
    old_cidr: str = pool.spec.cidr  # type: ignore[attr-defined]
    try:
        cidrs = split_cidr(old_cidr, parts)
    except ValueError as exc:
        raise CtlError(f"error splitting the CIDR {old_cidr} into {parts} CIDRs: {exc}") from None
    children = _children(pool, cidrs)

    spec = pool.spec.model_copy(update={"disabled": True})  # type: ignore[attr-defined]
    try:
        client.update(pool.model_copy(update={"spec": spec}))
    except DatastoreError:
        raise CtlError(f"error disabling IP pool {cidr or old_cidr}") from None
    for child in children:
        try:
            client.create(child, unsafe=True)
        except DatastoreError as exc:
            raise CtlError(
                f"error using unsafe create to make split pool with cidr {child.spec.cidr}: {exc}"  # type: ignore[attr-defined]
            ) from None
    try:
        client.delete("IPPool", pool.metadata.name)
    except DatastoreError as exc:
        raise CtlError(
            f"error removing the IP pool that was split {pool.metadata.name}: {exc}"
        ) from None

    click.echo(f"IP Pool {pool.metadata.name} was successfully split into {parts} smaller pools.")
    for child in children:
        click.echo(f"Created {child.metadata.name} with CIDR {child.spec.cidr}.")  # type: ignore[attr-defined]
    click.echo("Please refer to the documentation for final steps.")
    return children
