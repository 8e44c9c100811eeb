"""Set diffs restricted to the touched members (``Dirty.members``) against the whole-set
diff they replace: the same plan (commands, deltas, netlink element ops) after any sequence
of member adds/removes, set replacements, readbacks, commits and failed applies."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.nftables.elements import canonical_all
from calico.felix.nftables.state import KernelState, SetState
from calico.felix.nftables.transaction import Desired, Dirty, Plan, build_plan

ips = st.integers(0, 40).map(lambda n: f"10.250.0.{n}")
members = st.lists(ips, max_size=6)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from("ab"), members),
        st.tuples(st.just("remove"), st.sampled_from("ab"), members),
        st.tuples(st.just("replace"), st.sampled_from("ab"), members),
        st.tuples(st.just("apply"), st.booleans(), st.just([])),  # bool: does the kernel accept
        st.tuples(st.just("readback"), st.just(""), st.just([])),
    ),
    max_size=30,
)


def summary(plan: Plan) -> tuple[Any, ...]:
    ops_ = [(o.delete, o.name, o.members) for o in plan.element_ops]
    return plan.commands, plan.set_deltas, ops_, plan.stats


def whole(dirty: Dirty) -> Dirty:
    """The same dirty names with no member tracking: every dirty set diffed whole."""
    return replace(dirty, chains=set(dirty.chains), sets=set(dirty.sets), members={})


@settings(max_examples=300)
@given(st.lists(ips, max_size=20), st.lists(ips, max_size=20), st.booleans(), ops)
def test_member_tracked_plans_equal_whole_set_plans(
    a0: list[str], b0: list[str], interval: bool, sequence: list[tuple[str, str, list[str]]]
) -> None:
    typ = "ipv4_addr"
    desired = Desired()
    desired.sets["a"] = SetState(typ, interval, canonical_all(a0, typ))
    desired.sets["b"] = SetState(typ, interval, canonical_all(b0, typ))
    known = KernelState(table_exists=True, sets=copy.deepcopy(desired.sets))
    dirty = Dirty()
    for op, name, values in sequence:
        elems = canonical_all(values, typ)
        if op == "add":
            desired.sets[name].elements.update(elems)
            dirty.touch_members(name, elems)
        elif op == "remove":
            desired.sets[name].elements.difference_update(elems)
            dirty.touch_members(name, elems)
        elif op == "replace":
            desired.sets[name] = SetState(typ, interval, set(elems))
            dirty.touch_set(name)
        elif op == "readback":  # the kernel may hold anything; here: what we last committed
            dirty.mark_all(desired, known)
            assert dirty.members == {}
        else:
            tracked = build_plan("inet", "calico", desired, known, dirty)
            reference = build_plan("inet", "calico", desired, known, whole(dirty))
            assert summary(tracked) == summary(reference)
            if name:  # accepted: fold it into known, as NftablesTable._committed does
                tracked.commit(known)
                dirty.clear()
                assert known.sets == desired.sets
    final = build_plan("inet", "calico", desired, known, dirty)
    assert summary(final) == summary(build_plan("inet", "calico", desired, known, whole(dirty)))


def test_tracking_starts_only_on_a_clean_set() -> None:
    dirty = Dirty()
    dirty.touch_set("a")
    dirty.touch_members("a", {"x"})
    assert dirty.members == {} and dirty.sets == {"a"}  # replaced first: diffed whole
    dirty.touch_members("b", {"x"})
    dirty.touch_members("b", {"y"})
    assert dirty.members == {"b": {"x", "y"}}
    dirty.touch_set("b")
    assert dirty.members == {}
    dirty.touch_members("c", {"x"})
    dirty.clear()
    assert not dirty and dirty.members == {}


def test_a_restricted_diff_does_not_scan_the_set() -> None:
    """The point of the tracking: untouched members are never compared (a stale member
    outside the touched ones, planted here, is not seen)."""
    typ = "ipv4_addr"
    desired = Desired()
    desired.sets["a"] = SetState(typ, False, canonical_all(["10.0.0.1", "10.0.0.2"], typ))
    known = KernelState(table_exists=True, sets=copy.deepcopy(desired.sets))
    known.sets["a"].elements.add(canonical_all(["10.0.0.9"], typ).pop())  # planted
    dirty = Dirty()
    new = canonical_all(["10.0.0.3"], typ)
    desired.sets["a"].elements.update(new)
    dirty.touch_members("a", new)
    plan = build_plan("inet", "calico", desired, known, dirty)
    assert plan.set_deltas == {"a": (set(), new)}
    full = build_plan("inet", "calico", desired, known, whole(dirty))
    assert full.set_deltas["a"][0] == canonical_all(["10.0.0.9"], typ)  # whole diff sees it
