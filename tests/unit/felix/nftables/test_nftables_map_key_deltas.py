"""Verdict-map diffs restricted to the touched keys (``Dirty.map_keys``) against the whole-map
diff they replace: the same commands, netlink element ops and stats, and the same known state
once committed, after any sequence of entry sets/removals, map replacements, map removals,
readbacks, commits and failed applies."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.nftables.state import KernelState, MapState
from calico.felix.nftables.transaction import Desired, Dirty, Plan, build_plan

keys = st.integers(0, 12).map(lambda n: f"cali{n}")
verdicts = st.sampled_from([("goto", "c1"), ("goto", "c2"), ("jump", "c1"), ("drop", "")])
entries = st.dictionaries(keys, verdicts, max_size=8)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.sampled_from("ab"), keys, verdicts),
        st.tuples(st.just("remove"), st.sampled_from("ab"), keys, st.just(None)),
        st.tuples(st.just("replace"), st.sampled_from("ab"), entries, st.just(None)),
        st.tuples(st.just("drop-map"), st.sampled_from("ab"), st.just(""), st.just(None)),
        st.tuples(st.just("apply"), st.booleans(), st.just(""), st.just(None)),
        st.tuples(st.just("readback"), st.just(""), st.just(""), st.just(None)),
    ),
    max_size=30,
)


def summary(plan: Plan) -> tuple[Any, ...]:
    ops_ = [(o.delete, o.name, o.members) for o in plan.element_ops]
    return plan.commands, ops_, plan.stats


def whole(dirty: Dirty) -> Dirty:
    """The same dirty names with no key tracking: every dirty map diffed whole."""
    return replace(dirty, chains=set(dirty.chains), maps=set(dirty.maps), map_keys={})


def check(desired: Desired, known: KernelState, dirty: Dirty) -> Plan:
    tracked = build_plan("inet", "calico", desired, known, dirty)
    reference = build_plan("inet", "calico", desired, known, whole(dirty))
    assert summary(tracked) == summary(reference)
    after_reference = copy.deepcopy(known)
    reference.commit(after_reference)
    after_tracked = copy.deepcopy(known)
    tracked.commit(after_tracked)
    assert after_tracked.maps == after_reference.maps
    return tracked


@settings(max_examples=300)
@given(entries, entries, ops)
def test_key_tracked_plans_equal_whole_map_plans(
    a0: dict[str, tuple[str, str]],
    b0: dict[str, tuple[str, str]],
    sequence: list[tuple[str, Any, Any, Any]],
) -> None:
    desired = Desired()
    desired.maps["a"] = MapState("ifname", dict(a0))
    desired.maps["b"] = MapState("ifname", dict(b0))
    known = KernelState(table_exists=True, maps=copy.deepcopy(desired.maps))
    dirty = Dirty()
    for op, name, key, verdict in sequence:
        if op in ("set", "remove") and name not in desired.maps:
            continue  # the table raises for an unknown map (tested in the table's own tests)
        if op == "set":
            desired.maps[name].elements[key] = verdict
            dirty.touch_map_keys(name, (key,))
        elif op == "remove":
            desired.maps[name].elements.pop(key, None)
            dirty.touch_map_keys(name, (key,))
        elif op == "replace":
            desired.maps[name] = MapState("ifname", dict(key))
            dirty.touch_map(name)
        elif op == "drop-map":
            if desired.maps.pop(name, None) is not None:
                dirty.touch_map(name)
        elif op == "readback":  # the kernel may hold anything; here: what we last committed
            dirty.mark_all(desired, known)
            assert dirty.map_keys == {}
        else:
            tracked = check(desired, known, dirty)
            if name:  # accepted: fold it into known, as NftablesTable._committed does
                tracked.commit(known)
                dirty.clear()
                assert known.maps == desired.maps
    check(desired, known, dirty)


def test_a_restricted_diff_does_not_scan_the_map() -> None:
    """The point of the tracking: untouched entries are never compared (a stale entry
    outside the touched keys, planted here, is not seen; the whole diff sees it)."""
    desired = Desired()
    desired.maps["a"] = MapState("ifname", {"cali1": ("goto", "c1")})
    known = KernelState(table_exists=True, maps=copy.deepcopy(desired.maps))
    known.maps["a"].elements["cali9"] = ("goto", "c9")  # planted
    dirty = Dirty()
    desired.maps["a"].elements["cali2"] = ("goto", "c2")
    dirty.touch_map_keys("a", ("cali2",))
    plan = build_plan("inet", "calico", desired, known, dirty)
    assert [(o.delete, o.members) for o in plan.element_ops] == [
        (False, (("cali2", ("goto", "c2")),))
    ]
    plan.commit(known)
    assert known.maps["a"].elements == {
        "cali1": ("goto", "c1"),
        "cali2": ("goto", "c2"),
        "cali9": ("goto", "c9"),
    }
    full = build_plan("inet", "calico", desired, known, whole(dirty))
    assert [(o.delete, o.members) for o in full.element_ops] == [(True, (("cali9", None),))]


def test_tracking_starts_only_on_a_clean_map() -> None:
    dirty = Dirty()
    dirty.touch_map("a")
    dirty.touch_map_keys("a", ("x",))
    assert dirty.map_keys == {} and dirty.maps == {"a"}  # replaced first: diffed whole
    dirty.touch_map_keys("b", ("x",))
    dirty.touch_map_keys("b", ("y",))
    assert dirty.map_keys == {"b": {"x", "y"}}
    dirty.touch_map("b")
    assert dirty.map_keys == {}
    dirty.touch_map_keys("c", ("x",))
    dirty.clear()
    assert not dirty and dirty.map_keys == {}
