"""One planned transaction -> one nfnetlink batch, command for command (pure, no kernel).

Why: the libnftables path pays a cache fill over every interval set for any transaction with
elements in it, which a new workload's delta (its chains, the dispatch map entries, IP set
members) always has. The batch carries the plan's commands in the plan's order
(``transaction.py``), so the kernel sees the same atomic transaction libnftables would have
sent. A command or statement outside what ``nlrules.py`` and ``netlink.py`` encode raises
:class:`Unencodable`; the caller then sends the plan through libnftables unchanged.
"""

from __future__ import annotations

from typing import Any

from calico.felix.nftables.netlink import (
    NFT_MSG_DELCHAIN,
    NFT_MSG_DELRULE,
    NFT_MSG_DELSET,
    NFT_MSG_NEWCHAIN,
    NFT_MSG_NEWRULE,
    NFT_MSG_NEWSET,
    NFT_MSG_NEWSETELEM,
    NFT_MSG_NEWTABLE,
    ElementBatch,
    Unencodable,
    anonymous_set_bodies,
    attr,
    map_elem,
    member_elems,
    set_body,
)
from calico.felix.nftables.nlrules import (
    ANONYMOUS_SET_NAME,
    CHAIN_NAME,
    RULE_CHAIN,
    AnonymousSet,
    chain_body,
    rule_body,
)
from calico.felix.nftables.transaction import ElementOp, Plan, SetCreate

SET_NAME = 2  # NFTA_SET_NAME
# Bigger transactions go through libnftables. The sender grows its socket buffers to fit a
# batch (netlink.py) and the kernel takes a large one in a kvmalloc'd buffer, so this bounds
# only the memory of one batch: a new workload that activates 100 policies is ~200 KiB
# (bench_felix.py --large), the first apply at 50,000 remote endpoints and 10,000 policies
# 4.7 MB (bench_felix_scale.py; libnftables built that one in hundreds of MB).
MAX_TRANSACTION_BYTES = 64 * 1024 * 1024


def _name_attr(kind: int, name: Any) -> bytes:
    if not isinstance(name, str) or not name:
        raise Unencodable(f"object name {name!r}")
    return attr(kind, name.encode() + b"\0")


def _elements(batch: ElementBatch, op: ElementOp) -> None:
    if op.is_map:
        elems = [map_elem(k, op.type, v) for k, v in op.members]
    else:
        elems = member_elems(op.members, op.type, op.interval)
    batch.add(op.delete, op.name, elems)


def _create(
    batch: ElementBatch, create: SetCreate | None, kind: str, name: Any, set_id: int
) -> None:
    """A new set or map (NEWSET), then a set's members, as libnftables sends an ``add set``
    with inline elements; ``set_id`` numbers the batch's new sets from 1, as it does."""
    if create is None or create.name != name or create.is_map != (kind == "map"):
        raise Unencodable(f"add {kind} {name!r} without its structured form")
    body = set_body(create.name, create.type, create.interval, create.is_map, set_id)
    batch.add_object(NFT_MSG_NEWSET, create.name, body)
    if create.members:
        elems = member_elems(create.members, create.type, create.interval)
        batch.add(False, create.name, elems)


class _SetIds:
    """Numbers the batch's new sets from 1, named and inline alike, as libnftables does."""

    def __init__(self, batch: ElementBatch) -> None:
        self.batch, self.last = batch, 0

    def next(self) -> int:
        self.last += 1
        return self.last

    def inline(self, anon: AnonymousSet) -> int:
        """A rule's inline set: its NEWSET and elements go into the batch before the rule."""
        set_id = self.next()
        newset, elems = anonymous_set_bodies(
            ANONYMOUS_SET_NAME, anon.key_type, anon.key_len, anon.keys, anon.udata, set_id
        )
        self.batch.add_object(NFT_MSG_NEWSET, ANONYMOUS_SET_NAME, newset)
        self.batch.add_object(NFT_MSG_NEWSETELEM, ANONYMOUS_SET_NAME, elems)
        return set_id


def plan_batch(family: str, table: str, plan: Plan) -> ElementBatch:
    """The netlink batch for ``plan`` (raises :class:`Unencodable` for anything not encoded)."""
    if plan.replace_all:
        raise Unencodable("full table rewrite")
    batch = ElementBatch(family, table)
    ops = iter(plan.element_ops)
    creates = iter(plan.creates)
    set_ids = _SetIds(batch)
    for command in plan.commands:
        ((verb, what),) = command.items()
        ((kind, obj),) = what.items()
        if obj.get("family") != family or obj.get("table", obj.get("name")) != table:
            raise Unencodable(f"command outside our table: {command!r}")
        if kind == "element":
            op = next(ops, None)
            if op is None or op.name != obj["name"] or op.delete != (verb == "delete"):
                raise Unencodable("element command without its structured delta")
            _elements(batch, op)
            continue
        key = (verb, kind)
        if key == ("add", "rule"):  # most of any batch with chains: tested first
            try:
                body = rule_body(obj["chain"], obj["expr"], obj.get("comment"), set_ids.inline)
            except Unencodable as exc:  # name the chain: the reason is logged (table.py)
                raise Unencodable(f"a rule of {obj['chain']}: {exc}") from None
            batch.add_object(NFT_MSG_NEWRULE, obj["chain"], body)
            continue
        name = obj.get("name", obj.get("chain"))
        if key == ("add", "table"):
            batch.add_object(NFT_MSG_NEWTABLE, table, b"")
        elif key == ("flush", "chain"):
            batch.add_object(NFT_MSG_DELRULE, name, _name_attr(RULE_CHAIN, name))
        elif key == ("delete", "chain"):
            batch.add_object(NFT_MSG_DELCHAIN, name, _name_attr(CHAIN_NAME, name))
        elif key == ("add", "chain"):
            batch.add_object(NFT_MSG_NEWCHAIN, name, chain_body(obj))
        elif key in (("add", "set"), ("add", "map")):
            _create(batch, next(creates, None), kind, name, set_ids.next())
        elif key in (("delete", "set"), ("delete", "map")):
            batch.add_object(NFT_MSG_DELSET, name, _name_attr(SET_NAME, name))
        else:
            raise Unencodable(f"command {verb} {kind}")
    if next(ops, None) is not None or next(creates, None) is not None:
        raise Unencodable("structured element delta or set without its command")
    size = sum(len(p) if isinstance(p, bytes) else sum(map(len, p)) for _, _, p in batch.messages)
    if size > MAX_TRANSACTION_BYTES:
        raise Unencodable(f"transaction of {size} bytes is too big for one netlink send")
    return batch


__all__ = ["MAX_TRANSACTION_BYTES", "plan_batch"]
