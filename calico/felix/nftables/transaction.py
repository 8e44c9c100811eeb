"""Build one libnftables JSON transaction from desired vs known state (pure, no kernel).

Command order inside the transaction is what makes a single atomic batch valid:

1. ``add table`` (idempotent; recreates a table someone deleted);
2. flush every existing chain that is rewritten, re-created or deleted (drops its references);
3. delete chains whose hook spec changed and sets/maps whose type changed;
4. add new sets (with members) and maps;
5. add every new/rewritten chain, empty (forward references: any rule may jump to any of them);
6. add the rules of rewritten chains (a rewrite is wholesale: flush in 2, re-add here);
7. element deltas: removals first (frees overlapping intervals / changed map keys), then adds;
8. delete stale maps (their elements may point at stale chains), stale sets, then stale chains;
   rules that used any of them were flushed in step 2, so nothing refers to them any more.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from calico.felix.nftables.elements import (
    Element,
    SetType,
    Verdict,
    sort_key,
    to_json,
    verdict_json,
)
from calico.felix.nftables.state import ChainState, KernelState, MapState, RenderedChain, SetState

# A created set's members are sorted (``sort_key``) up to this many, else left in the set's
# own order: the kernel holds the same set either way, and sorting the first apply's 267,000
# members at 250,000 remote endpoints was ~0.3-0.45 s of it (design/performance.md "First
# apply at 250,000 (session 8)"). The libnftables JSON is sorted always (``json_commands``).
SORTED_CREATE_LIMIT = 10_000


def creation_order(elements: set[Element]) -> tuple[Element, ...]:
    """A new set's members in the order its creation sends them: sorted when there are at
    most ``SORTED_CREATE_LIMIT`` (stable, readable batches), else the set's iteration order."""
    if len(elements) > SORTED_CREATE_LIMIT:
        return tuple(elements)
    return tuple(sorted(elements, key=sort_key))


@dataclass
class Desired:
    chains: dict[str, RenderedChain] = field(default_factory=dict)
    sets: dict[str, SetState] = field(default_factory=dict)
    maps: dict[str, MapState] = field(default_factory=dict)


def _touch_items(
    dirty: set[str], tracked: dict[str, set[Element]], name: str, items: Iterable[Element]
) -> None:
    """``name`` changed only at ``items``: a clean name starts tracking them; a name already
    dirtied whole (dirty but untracked) stays whole."""
    if name not in dirty:
        dirty.add(name)
        tracked[name] = set(items)
    elif (touched := tracked.get(name)) is not None:
        touched.update(items)


@dataclass
class Dirty:
    """Names whose desired or known state may differ; only these are diffed at apply time.

    ``members``: for a dirty set whose only changes since it was last clean are member adds
    and removes, the members touched. Known equals desired outside them (the set was clean),
    so its diff looks only at those, not at the whole set: with 250,000 remote endpoints one
    member change made every apply compare whole sets (design/performance.md "Full-Felix
    scale"). A set dirtied any other way (replaced, removed, a readback) is diffed whole.
    ``map_keys``: the same for a verdict map changed only by element sets and removals (a new
    workload's two dispatch map entries, not a diff of one entry per local workload)."""

    chains: set[str] = field(default_factory=set)
    sets: set[str] = field(default_factory=set)
    maps: set[str] = field(default_factory=set)
    members: dict[str, set[Element]] = field(default_factory=dict)
    map_keys: dict[str, set[Element]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.chains or self.sets or self.maps)

    def clear(self) -> None:
        self.chains.clear()
        self.sets.clear()
        self.maps.clear()
        self.members.clear()
        self.map_keys.clear()

    def touch_map_keys(self, name: str, keys: Iterable[Element]) -> None:
        """Map ``name`` changed only at ``keys`` (tracked if it was clean until now)."""
        _touch_items(self.maps, self.map_keys, name, keys)

    def touch_map(self, name: str) -> None:
        """Map ``name`` changed as a whole: its next diff compares all of it."""
        self.maps.add(name)
        self.map_keys.pop(name, None)

    def touch_members(self, name: str, members: Iterable[Element]) -> None:
        """Set ``name`` changed only at ``members`` (tracked if it was clean until now)."""
        _touch_items(self.sets, self.members, name, members)

    def touch_set(self, name: str) -> None:
        """Set ``name`` changed as a whole: its next diff compares all of it."""
        self.sets.add(name)
        self.members.pop(name, None)

    def mark_all(self, *states: Desired | KernelState) -> None:
        self.members.clear()
        self.map_keys.clear()
        for st in states:
            self.chains.update(st.chains)
            self.sets.update(st.sets)
            self.maps.update(st.maps)


@dataclass
class Stats:
    chains_written: list[str] = field(default_factory=list)
    chains_deleted: list[str] = field(default_factory=list)
    sets_created: int = 0
    sets_deleted: int = 0
    maps_created: int = 0
    maps_deleted: int = 0
    elements_added: int = 0
    elements_removed: int = 0


@dataclass(frozen=True)
class ElementOp:
    """One element delta: set members (canonical) or map ``(key, verdict)`` pairs; verdict
    is None for a map removal."""

    delete: bool
    name: str
    type: SetType
    interval: bool  # an interval set (never for maps)
    members: tuple[Any, ...]
    is_map: bool = False


@dataclass(frozen=True)
class SetCreate:
    """A set or map the transaction creates (step 4), with a new set's members (sorted, as its
    inline ``elem``), for the netlink batch (nlbatch.py)."""

    name: str
    type: SetType
    interval: bool
    members: tuple[Element, ...] = ()
    is_map: bool = False


@dataclass
class Plan:
    """The commands of one transaction and the known-state updates to commit if it succeeds."""

    commands: list[dict[str, Any]]
    stats: Stats
    chains: dict[str, ChainState | None] = field(default_factory=dict)
    sets: dict[str, SetState | None] = field(default_factory=dict)
    maps: dict[str, MapState | None] = field(default_factory=dict)
    set_deltas: dict[str, tuple[set[Element], set[Element]]] = field(default_factory=dict)
    # map name -> (keys removed, entries added or changed), for maps diffed at their keys
    map_deltas: dict[str, tuple[list[Element], dict[Element, Verdict]]] = field(
        default_factory=dict
    )
    replace_all: bool = False
    # The step-7 element deltas in structured form, in command order, for the netlink batch
    # (nlbatch.py).
    element_ops: list[ElementOp] = field(default_factory=list)
    # The step-4 set and map creations in structured form, in command order (nlbatch.py).
    creates: list[SetCreate] = field(default_factory=list)
    # Set commands whose ``elem`` JSON is not built yet: (command object, members, type).
    pending_elems: list[tuple[dict[str, Any], tuple[Element, ...], SetType]] = field(
        default_factory=list
    )

    @property
    def empty(self) -> bool:
        return not self.commands

    def json_commands(self) -> list[dict[str, Any]]:
        """The commands as libnftables takes them, set members' JSON included. Built only
        here: a netlink batch encodes the structured members (``creates``, ``element_ops``)
        and never reads it, and at 250,000 endpoints it was a measurable part of the plan
        (design/performance.md "Restart: reading the table back over netlink (session 7)")."""
        for obj, members, typ in self.pending_elems:
            ordered = sorted(members, key=sort_key)  # creation_order may not have sorted
            obj["elem"] = [to_json(e, typ) for e in ordered]
        self.pending_elems.clear()
        return self.commands

    def commit(self, known: KernelState) -> None:
        """Fold the plan into ``known`` once the kernel accepted the transaction."""
        known.table_exists = True
        if self.replace_all:
            known.chains.clear()
            known.sets.clear()
            known.maps.clear()
        for store, updates in (
            (known.chains, self.chains),
            (known.sets, self.sets),
            (known.maps, self.maps),
        ):
            for name, value in updates.items():
                if value is None:
                    store.pop(name, None)
                else:
                    store[name] = value  # type: ignore[assignment]
        for name, (removes, adds) in self.set_deltas.items():  # in place: no O(set) copy
            elements = known.sets[name].elements
            elements.difference_update(removes)
            elements.update(adds)
        for name, (gone, entries) in self.map_deltas.items():  # in place, likewise
            known_map = known.maps[name].elements
            for key in gone:
                known_map.pop(key, None)
            known_map.update(entries)


class _Builder:
    def __init__(self, family: str, table: str) -> None:
        self.family, self.table = family, table
        self.phases: list[list[dict[str, Any]]] = [[] for _ in range(8)]
        self.pending: list[tuple[dict[str, Any], tuple[Element, ...], SetType]] = []

    def obj(self, **kw: Any) -> dict[str, Any]:
        return {"family": self.family, "table": self.table, **kw}

    def cmd(self, phase: int, verb: str, kind: str, **kw: Any) -> None:
        self.phases[phase - 1].append({verb: {kind: self.obj(**kw)}})

    def add_rules(self, chain: str, rules: Iterable[tuple[Any, Any]]) -> None:
        """Phase 6's ``add rule`` commands, as ``cmd`` builds them, in one literal each: a
        new endpoint chain at 1,000 policies is ~200 rules, and the keyword-argument dicts
        were a measurable part of its apply (design/performance.md
        "TTFR: one ack per batch, and the kernel's jump validation")."""
        family, table = self.family, self.table
        self.phases[5].extend(
            {"add": {"rule": {"family": family, "table": table, "chain": chain, "expr": exprs,
                              "comment": comment}}}
            for exprs, comment in rules
        )  # fmt: skip

    def add_chain(self, rc: RenderedChain) -> None:
        self.phases[4].append({"add": {"chain": self.chain_obj(rc)}})

    def chain_obj(self, rc: RenderedChain) -> dict[str, Any]:
        o = self.obj(name=rc.name)
        if rc.base is not None:
            o.update(
                type=rc.base.type,
                hook=rc.base.hook,
                prio=int(rc.base.priority),
                policy=rc.base.policy,
            )
        return o

    def elements(self, phase: int, verb: str, name: str, elems: list[Any]) -> None:
        if elems:
            self.cmd(phase, verb, "element", name=name, elem=elems)

    def set_elements(
        self, phase: int, verb: str, name: str, members: tuple[Element, ...], typ: SetType
    ) -> None:
        """``elements`` of set members whose JSON ``Plan.json_commands`` builds (the key
        lands last in the object either way, so the JSON text is the same)."""
        if members:
            obj = self.obj(name=name)
            self.phases[phase - 1].append({verb: {"element": obj}})
            self.pending.append((obj, members, typ))

    def commands(self) -> list[dict[str, Any]]:
        return [c for phase in self.phases for c in phase]


def build_plan(
    family: str,
    table: str,
    desired: Desired,
    known: KernelState,
    dirty: Dirty,
    *,
    full_rewrite: bool = False,
) -> Plan:
    """Commands taking the kernel from ``known`` to ``desired`` for the ``dirty`` names.

    ``full_rewrite`` deletes and re-adds the whole table in the same transaction (the recovery path
    after repeated failures); ``known`` is then ignored.
    """
    if full_rewrite:
        known, dirty = KernelState(), Dirty()
        dirty.mark_all(desired)
    b = _Builder(family, table)
    plan = Plan(commands=[], stats=Stats(), replace_all=full_rewrite)
    recreated_refs = _plan_sets_and_maps(b, plan, desired, known, dirty)
    _plan_chains(b, plan, desired, known, dirty, recreated_refs)
    commands = b.commands()
    if not commands and known.table_exists and not full_rewrite:
        return plan
    head = [{"add": {"table": {"family": family, "name": table}}}]
    if full_rewrite:
        head += [
            {"delete": {"table": {"family": family, "name": table}}},
            {"add": {"table": {"family": family, "name": table}}},
        ]
    plan.commands = head + commands
    plan.pending_elems = b.pending
    return plan


def _plan_sets_and_maps(
    b: _Builder, plan: Plan, desired: Desired, known: KernelState, dirty: Dirty
) -> set[str]:
    """Plan set and map changes; returns the names re-created with a new type."""
    recreated: set[str] = set()
    for name in sorted(dirty.sets):
        want, have = desired.sets.get(name), known.sets.get(name)
        _plan_set(b, plan, name, want, have, recreated, dirty.members.get(name))
    for name in sorted(dirty.maps):
        want, have = desired.maps.get(name), known.maps.get(name)
        _plan_map(b, plan, name, want, have, recreated, dirty.map_keys.get(name))
    return recreated


def _plan_unwanted(b: _Builder, kind: str, name: str, have: object, updates: dict[str, Any]) -> int:
    """A set or map nothing desires: delete it last (step 8) if the kernel has it; 1 if so."""
    if have is None:
        return 0
    b.cmd(8, "delete", kind, name=name)
    updates[name] = None
    return 1


def _plan_retype(b: _Builder, kind: str, name: str, recreated: set[str]) -> None:
    """A set or map whose type changed (immutable in nft): delete it in step 3, re-add in 4."""
    b.cmd(3, "delete", kind, name=name)
    recreated.add(name)


def _plan_elements(b: _Builder, st: Stats, name: str, removes: list[Any], adds: list[Any]) -> None:
    """Step 7: an existing set's or map's element removals, then its adds."""
    b.elements(7, "delete", name, removes)
    b.elements(7, "add", name, adds)
    st.elements_removed += len(removes)
    st.elements_added += len(adds)


def _plan_set(
    b: _Builder,
    plan: Plan,
    name: str,
    want: SetState | None,
    have: SetState | None,
    recreated: set[str],
    touched: set[Element] | None = None,
) -> None:
    """``touched``: see :attr:`Dirty.members` (None: compare the whole set)."""
    st = plan.stats
    if want is None:
        st.sets_deleted += _plan_unwanted(b, "set", name, have, plan.sets)
        return
    if have is not None and not have.same_kind(want):
        _plan_retype(b, "set", name, recreated)
        have = None
    if have is None:
        obj = _set_obj(name, want)
        members = creation_order(want.elements)
        b.cmd(4, "add", "set", **obj)
        if members:  # members inline: one command per new set, not two (JSON built lazily)
            b.pending.append((b.phases[3][-1]["add"]["set"], members, want.type))
        plan.creates.append(SetCreate(name, want.type, want.interval, members))
        st.sets_created += 1
        st.elements_added += len(want.elements)
        plan.sets[name] = SetState(want.type, want.interval, set(want.elements))
        return
    if touched is not None:
        had, wants = have.elements, want.elements
        removes = {m for m in touched if m in had and m not in wants}
        adds = {m for m in touched if m in wants and m not in had}
    else:
        removes, adds = have.elements - want.elements, want.elements - have.elements
    if removes or adds:
        plan.set_deltas[name] = (removes, adds)
        for delete, members in ((True, removes), (False, adds)):
            ordered = tuple(sorted(members, key=sort_key))
            b.set_elements(7, "delete" if delete else "add", name, ordered, want.type)
            if members:
                plan.element_ops.append(ElementOp(delete, name, want.type, want.interval, ordered))
        st.elements_removed += len(removes)
        st.elements_added += len(adds)


def _plan_map(
    b: _Builder,
    plan: Plan,
    name: str,
    want: MapState | None,
    have: MapState | None,
    recreated: set[str],
    touched: set[Element] | None = None,
) -> None:
    """``touched``: see :attr:`Dirty.map_keys` (None: compare the whole map)."""
    st = plan.stats
    if want is None:
        st.maps_deleted += _plan_unwanted(b, "map", name, have, plan.maps)
        return
    created = have is None or have.key_type != want.key_type
    if not created and touched is not None:
        _plan_map_keys(b, plan, name, want, have, touched)  # type: ignore[arg-type]
        return
    if have is not None and created:
        _plan_retype(b, "map", name, recreated)
    if created:
        b.cmd(4, "add", "map", name=name, type=_type_json(want.key_type), map="verdict")
        plan.creates.append(SetCreate(name, want.key_type, False, is_map=True))
        st.maps_created += 1
        have = MapState(want.key_type)
    assert have is not None
    # A changed verdict is a delete + add of the key: nft refuses to overwrite map data.
    removes = sorted(
        (k for k, v in have.elements.items() if want.elements.get(k) != v), key=sort_key
    )
    adds = sorted((k for k, v in want.elements.items() if have.elements.get(k) != v), key=sort_key)
    if not (removes or adds or created):
        return
    none: Verdict | None = None
    if removes:
        gone = tuple((k, none) for k in removes)
        plan.element_ops.append(ElementOp(True, name, want.key_type, False, gone, is_map=True))
    if adds:
        new = tuple((k, want.elements[k]) for k in adds)
        plan.element_ops.append(ElementOp(False, name, want.key_type, False, new, is_map=True))
    _plan_elements(
        b,
        st,
        name,
        [to_json(k, want.key_type) for k in removes],
        [[to_json(k, want.key_type), verdict_json(want.elements[k])] for k in adds],
    )
    plan.maps[name] = MapState(want.key_type, dict(want.elements))


def _plan_map_keys(
    b: _Builder, plan: Plan, name: str, want: MapState, have: MapState, touched: set[Element]
) -> None:
    """An existing map changed only at ``touched``: the same commands as the whole diff
    (outside ``touched`` known equals desired), costing O(touched), not O(map)."""
    had, wants = have.elements, want.elements
    removes = sorted((k for k in touched if k in had and wants.get(k) != had[k]), key=sort_key)
    adds = sorted((k for k in touched if k in wants and had.get(k) != wants[k]), key=sort_key)
    if not (removes or adds):
        return
    none: Verdict | None = None
    if removes:
        gone = tuple((k, none) for k in removes)
        plan.element_ops.append(ElementOp(True, name, want.key_type, False, gone, is_map=True))
    if adds:
        new = tuple((k, wants[k]) for k in adds)
        plan.element_ops.append(ElementOp(False, name, want.key_type, False, new, is_map=True))
    _plan_elements(
        b,
        plan.stats,
        name,
        [to_json(k, want.key_type) for k in removes],
        [[to_json(k, want.key_type), verdict_json(wants[k])] for k in adds],
    )
    plan.map_deltas[name] = (removes, {k: wants[k] for k in adds})


def _plan_chains(
    b: _Builder,
    plan: Plan,
    desired: Desired,
    known: KernelState,
    dirty: Dirty,
    recreated_refs: set[str],
) -> None:
    names = set(dirty.chains)
    if recreated_refs:  # chains using a re-created set must let go of it before the delete
        names.update(n for n, rc in desired.chains.items() if rc.refs & recreated_refs)
    stale: list[str] = []
    for name in sorted(names):
        want, have = desired.chains.get(name), known.chains.get(name)
        if want is None:
            if have is not None:
                stale.append(name)
            continue
        forced = bool(want.refs & recreated_refs)
        if have is not None and have.hook != want.state.hook:
            b.cmd(2, "flush", "chain", name=name)
            b.cmd(3, "delete", "chain", name=name)
            have = None
        if have is not None and have.hashes == want.state.hashes and not forced:
            if have.policy != want.state.policy:  # policy is mutable in place
                b.add_chain(want)
                plan.chains[name] = want.state
            continue
        if have is not None:
            b.cmd(2, "flush", "chain", name=name)
        b.add_chain(want)
        b.add_rules(name, want.rules)
        plan.chains[name] = want.state
        plan.stats.chains_written.append(name)
    for name in stale:
        b.cmd(2, "flush", "chain", name=name)
        b.cmd(8, "delete", "chain", name=name)
        plan.chains[name] = None
        plan.stats.chains_deleted.append(name)
    # Stale maps may still goto stale chains: chains go last (their own rules were flushed).
    kinds = {"map": 0, "set": 1, "chain": 2}
    b.phases[7].sort(key=lambda c: kinds[next(iter(c["delete"]))])


def _set_obj(name: str, s: SetState) -> dict[str, Any]:
    o: dict[str, Any] = {"name": name, "type": _type_json(s.type)}
    if s.interval:
        o["flags"] = ["interval"]
    return o


def _type_json(typ: SetType) -> str | list[str]:
    return list(typ) if isinstance(typ, tuple) else typ
