"""Differential tests: the optimised indexes against their linear-scan oracles.

Both implementations are driven with the same random call sequence. After every call their
callback multisets must be equal and form a valid stream (a match starts only if absent and stops
only if present; a member is added only if absent and removed only if present). At the end both
must agree with each other and with a from-scratch brute-force computation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable

from hypothesis import HealthCheck, given, settings
from labelindex_helpers import (
    Recorder,
    apply_ip_set_op,
    named_port_index_ops,
    selector_index_ops,
)

from calico.felix.labelindex import (
    LinearSelectorAndNamedPortIndex,
    LinearSelectorIndex,
    NamedPort,
    SelectorAndNamedPortIndex,
    SelectorIndex,
    normalise_nets,
)
from calico.felix.labelindex.members import port_members
from calico.selector import parse

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _apply_selector_op(index: SelectorIndex | LinearSelectorIndex, op: tuple) -> None:
    kind, *args = op
    if kind == "sel":
        index.update_selector(args[0], parse(args[1]))
    elif kind == "delsel":
        index.delete_selector(args[0])
    elif kind == "item":
        index.update_labels(args[0], args[1], args[2])
    elif kind == "delitem":
        index.delete_labels(args[0])
    elif kind == "parent":
        index.update_parent_labels(args[0], args[1])
    else:
        index.delete_parent_labels(args[0])


def _check_match_stream(
    model: set[tuple[Hashable, Hashable]], events: Counter[tuple[str, Hashable, Hashable]]
) -> None:
    for (sign, sel_id, item_id), n in events.items():
        assert n == 1, f"duplicate event {sign}{(sel_id, item_id)}"
        pair = (sel_id, item_id)
        if sign == "+":
            assert pair not in model, f"start of already-started {pair}"
            model.add(pair)
        else:
            assert pair in model, f"stop of never-started {pair}"
            model.discard(pair)


def _brute_force_matches(ops: list[tuple]) -> set[tuple[str, str]]:
    """Replay the final state and evaluate every selector against every item."""
    selectors: dict[str, str] = {}
    items: dict[str, tuple[dict[str, str], list[str]]] = {}
    parents: dict[str, dict[str, str]] = {}
    for kind, *args in ops:
        if kind == "sel":
            selectors[args[0]] = args[1]
        elif kind == "delsel":
            selectors.pop(args[0], None)
        elif kind in ("item", "ep"):
            items[args[0]] = (args[1], args[-1])
        elif kind in ("delitem", "delep"):
            items.pop(args[0], None)
        elif kind == "parent":
            parents[args[0]] = args[1]
        elif kind == "delparent":
            parents.pop(args[0], None)
    out = set()
    for item_id, (own, parent_ids) in items.items():
        labels: dict[str, str] = {}
        for pid in parent_ids:  # first parent wins: only fill labels not yet set
            for k, v in parents.get(pid, {}).items():
                labels.setdefault(k, v)
        labels.update(own)
        for sel_id, text in selectors.items():
            if parse(text).evaluate_interpreted(labels):
                out.add((sel_id, item_id))
    return out


@SETTINGS
@given(selector_index_ops)
def test_selector_index_matches_linear_oracle(ops: list[tuple]) -> None:
    fast_rec, slow_rec = Recorder(), Recorder()
    fast = SelectorIndex(fast_rec.started, fast_rec.stopped)
    slow = LinearSelectorIndex(slow_rec.started, slow_rec.stopped)
    model: set[tuple[Hashable, Hashable]] = set()
    for op in ops:
        _apply_selector_op(fast, op)
        _apply_selector_op(slow, op)
        fast_events, slow_events = fast_rec.take(), slow_rec.take()
        assert fast_events == slow_events, op
        _check_match_stream(model, fast_events)
        assert fast.matches() == model
    assert fast.matches() == slow.matches() == _brute_force_matches(ops)
    for item_id in {op[1] for op in ops if op[0] in ("item", "delitem")}:
        assert fast.effective_labels(item_id) == slow.effective_labels(item_id)
        assert fast.selectors_matching(item_id) == slow.selectors_matching(item_id)
    for sel_id in {op[1] for op in ops if op[0] in ("sel", "delsel")}:
        assert fast.items_matching(sel_id) == slow.items_matching(sel_id)


def check_member_stream(
    model: dict[str, set[str]], op: tuple, events: Counter[tuple[str, Hashable, Hashable]]
) -> None:
    """Validate one call's member events against ``model`` (set ID -> members) and apply them."""
    if op[0] == "delset":
        assert not events, "delete_ip_set must be silent"
        model.pop(op[1], None)
        return
    for (sign, set_id, member), n in events.items():
        assert n == 1, f"duplicate event {sign}{(set_id, member)}"
        members = model.setdefault(str(set_id), set())
        if sign == "+":
            assert member not in members, f"re-add of {member} to {set_id}"
            members.add(str(member))
        else:
            assert member in members, f"removal of never-added {member} from {set_id}"
            members.discard(str(member))


def _brute_force_members(ops: list[tuple]) -> dict[str, set[str]]:
    sets: dict[str, tuple] = {}
    eps: dict[str, tuple] = {}
    for kind, *args in ops:
        if kind == "set":
            sets[args[0]] = tuple(args[1:])
        elif kind == "delset":
            sets.pop(args[0], None)
        elif kind == "ep":
            eps[args[0]] = tuple(args[1:])
        elif kind == "delep":
            eps.pop(args[0], None)
    as_selector_ops = []
    for kind, *args in ops:
        if kind == "set":
            as_selector_ops.append(("sel", args[0], args[1]))
        elif kind == "delset":
            as_selector_ops.append(("delsel", args[0]))
        else:
            as_selector_ops.append((kind, *args))
    matches = _brute_force_matches(as_selector_ops)
    out: dict[str, set[str]] = {set_id: set() for set_id in sets}
    for set_id, item_id in matches:
        _, protocol, port_name = sets[set_id]
        _, nets, ports, _ = eps[item_id]
        normalised = normalise_nets(nets)
        if port_name is None:
            out[set_id].update(normalised)
        else:
            ports_ = [NamedPort(*p) for p in ports]
            out[set_id].update(port_members(normalised, ports_, port_name, protocol or "any"))
    return out


@SETTINGS
@given(named_port_index_ops)
def test_named_port_index_matches_linear_oracle(ops: list[tuple]) -> None:
    fast_rec, slow_rec = Recorder(), Recorder()
    fast = SelectorAndNamedPortIndex(fast_rec.started, fast_rec.stopped)
    slow = LinearSelectorAndNamedPortIndex(slow_rec.started, slow_rec.stopped)
    model: dict[str, set[str]] = {}
    for op in ops:
        apply_ip_set_op(fast, op)
        apply_ip_set_op(slow, op)
        fast_events, slow_events = fast_rec.take(), slow_rec.take()
        assert fast_events == slow_events, op
        check_member_stream(model, op, fast_events)
        for set_id in fast.ip_set_ids():
            assert fast.members(set_id) == model.get(set_id, set())
    assert fast.ip_set_ids() == slow.ip_set_ids()
    expected = _brute_force_members(ops)
    assert set(fast.ip_set_ids()) == set(expected)
    for set_id, members in expected.items():
        assert fast.members(set_id) == slow.members(set_id) == members


@settings(max_examples=150, deadline=None)
@given(named_port_index_ops)
def test_callbacks_never_remove_a_member_that_was_not_added(ops: list[tuple]) -> None:
    """Replaying each index's own callback stream reproduces its membership exactly, and no
    removal names a member that the stream had not added (checked by check_member_stream)."""
    for cls in (SelectorAndNamedPortIndex, LinearSelectorAndNamedPortIndex):
        rec = Recorder()
        index = cls(rec.started, rec.stopped)
        model: dict[str, set[str]] = {}
        for op in ops:
            apply_ip_set_op(index, op)
            check_member_stream(model, op, rec.take())
        for set_id in index.ip_set_ids():
            assert index.members(set_id) == model.get(set_id, set())
