"""Scenario tests for SelectorIndex, run against both the optimised and the linear index."""

from __future__ import annotations

import pytest
from labelindex_helpers import Recorder

from calico.felix.labelindex import LinearSelectorIndex, SelectorIndex
from calico.felix.labelindex.candidates import SelectorCandidateIndex, choose_key
from calico.selector import parse, parse_uncached


@pytest.fixture(params=[SelectorIndex, LinearSelectorIndex], ids=["optimised", "linear"])
def idx(request: pytest.FixtureRequest):
    rec = Recorder()
    index = request.param(rec.started, rec.stopped)
    index.rec = rec
    return index


def events(index) -> set[tuple]:
    counted = index.rec.take()
    assert all(n == 1 for n in counted.values())
    return set(counted)


def test_label_change_moves_item_in_and_out(idx) -> None:
    idx.update_selector("s", parse('app == "web"'))
    idx.update_labels("e1", {"app": "web"})
    assert events(idx) == {("+", "s", "e1")}
    idx.update_labels("e1", {"app": "db"})
    assert events(idx) == {("-", "s", "e1")}
    idx.update_labels("e1", {"app": "web", "x": "y"})
    assert events(idx) == {("+", "s", "e1")}


def test_selector_added_after_items_scans_them(idx) -> None:
    idx.update_labels("e1", {"app": "web"})
    idx.update_labels("e2", {"app": "db"})
    idx.update_labels("e3", {})
    idx.update_selector("s", parse('app in {"web", "db"}'))
    assert events(idx) == {("+", "s", "e1"), ("+", "s", "e2")}
    idx.update_selector("s", parse('app == "db" || !has(app)'))
    assert events(idx) == {("-", "s", "e1"), ("+", "s", "e3")}


def test_inherits_parent_labels(idx) -> None:
    idx.update_selector("s", parse('ns == "prod"'))
    idx.update_parent_labels("kns.prod", {"ns": "prod"})
    idx.update_labels("e1", {"app": "web"}, ["kns.prod"])
    assert events(idx) == {("+", "s", "e1")}
    assert idx.effective_labels("e1") == {"app": "web", "ns": "prod"}


def test_parent_arriving_late_then_leaving(idx) -> None:
    idx.update_selector("s", parse('ns == "prod"'))
    idx.update_labels("e1", {}, ["kns.prod"])
    assert events(idx) == set()
    idx.update_parent_labels("kns.prod", {"ns": "prod"})
    assert events(idx) == {("+", "s", "e1")}
    idx.delete_parent_labels("kns.prod")
    assert events(idx) == {("-", "s", "e1")}
    idx.update_parent_labels("kns.prod", {"ns": "prod"})
    assert events(idx) == {("+", "s", "e1")}


def test_own_labels_beat_parent_labels(idx) -> None:
    idx.update_selector("s", parse('role == "parent"'))
    idx.update_parent_labels("p", {"role": "parent"})
    idx.update_labels("e1", {"role": "own"}, ["p"])
    assert events(idx) == set()
    idx.update_labels("e1", {}, ["p"])
    assert events(idx) == {("+", "s", "e1")}


def test_first_listed_parent_wins(idx) -> None:
    idx.update_selector("s1", parse('k == "one"'))
    idx.update_selector("s2", parse('k == "two"'))
    idx.update_parent_labels("p1", {"k": "one"})
    idx.update_parent_labels("p2", {"k": "two", "only2": "x"})
    idx.update_labels("e1", {}, ["p1", "p2"])
    assert events(idx) == {("+", "s1", "e1")}
    assert idx.effective_labels("e1") == {"k": "one", "only2": "x"}
    idx.update_labels("e1", {}, ["p2", "p1"])
    assert events(idx) == {("-", "s1", "e1"), ("+", "s2", "e1")}


def test_parent_update_reaches_every_child(idx) -> None:
    idx.update_selector("s", parse("has(team)"))
    for item in ("e1", "e2"):
        idx.update_labels(item, {}, ["p"])
    idx.update_labels("e3", {}, ["other"])
    idx.update_parent_labels("p", {"team": "a"})
    assert events(idx) == {("+", "s", "e1"), ("+", "s", "e2")}


def test_no_op_updates_emit_nothing(idx) -> None:
    idx.update_selector("s", parse('a == "b"'))
    idx.update_parent_labels("p", {"a": "b"})
    idx.update_labels("e1", {"c": "d"}, ["p"])
    assert events(idx) == {("+", "s", "e1")}
    idx.update_selector("s", parse("a=='b'"))  # same canonical form
    idx.update_labels("e1", {"c": "d"}, ["p"])
    idx.update_parent_labels("p", {"a": "b"})
    idx.update_labels("e1", {"c": "d", "a": "b"}, ["p"])  # effective labels unchanged
    idx.delete_selector("unknown")
    idx.delete_labels("unknown")
    idx.delete_parent_labels("unknown")
    assert events(idx) == set()


def test_deletes_stop_matches(idx) -> None:
    idx.update_selector("s", parse("all()"))
    idx.update_selector("t", parse("has(a)"))
    idx.update_labels("e1", {"a": "1"})
    idx.update_labels("e2", {})
    assert events(idx) == {("+", "s", "e1"), ("+", "s", "e2"), ("+", "t", "e1")}
    idx.delete_labels("e1")
    assert events(idx) == {("-", "s", "e1"), ("-", "t", "e1")}
    idx.delete_selector("s")
    assert events(idx) == {("-", "s", "e2")}
    idx.update_labels("e2", {"a": "2"})
    assert events(idx) == {("+", "t", "e2")}
    assert idx.matches() == {("t", "e2")}
    assert idx.items_matching("t") == {"e2"}
    assert idx.selectors_matching("e2") == {"t"}


def test_unindexable_and_impossible_selectors(idx) -> None:
    idx.update_selector("absent", parse('!has(a) && b != "x"'))
    idx.update_selector("never", parse("has(a) && !has(a)"))
    idx.update_selector("empty-set", parse("a in {}"))
    idx.update_labels("e1", {})
    idx.update_labels("e2", {"a": "1"})
    assert events(idx) == {("+", "absent", "e1")}


def test_parent_referenced_before_and_after_existence_is_tracked(idx) -> None:
    idx.update_selector("s", parse("has(x)"))
    idx.update_parent_labels("p", {"x": "1"})
    idx.update_labels("e1", {}, ["p"])
    idx.update_labels("e1", {}, [])  # stops referencing p
    assert events(idx) == {("+", "s", "e1"), ("-", "s", "e1")}
    idx.update_parent_labels("p", {"x": "2"})
    idx.delete_parent_labels("p")
    assert events(idx) == set()
    idx.update_labels("e1", {}, ["p"])
    assert events(idx) == set()


def test_candidate_key_prefers_fewest_values_then_presence() -> None:
    key = choose_key(parse('a in {"1", "2"} && b == "x" && has(c)'))
    assert (key.kind, key.label, key.values) == ("pair", "b", frozenset({"x"}))
    assert (key.label2, key.values2) == ("a", frozenset({"1", "2"}))
    key = choose_key(parse('c == "z" && b == "x" && a == "y"'))  # ties: by name
    assert (key.kind, key.label, key.label2) == ("pair", "a", "b")
    key = choose_key(parse('b == "x" && has(c)'))
    assert (key.kind, key.label, key.values) == ("value", "b", frozenset({"x"}))
    nine = "{" + ", ".join(f'"{i}"' for i in range(9)) + "}"
    key = choose_key(parse(f"a in {nine} && b in {nine}"))  # 81 pairs > MAX_PAIRS
    assert (key.kind, key.label) == ("value", "a")
    assert choose_key(parse('has(c) && a != "x"')).kind == "present"
    assert choose_key(parse("!has(c)")).kind == "unindexed"
    assert choose_key(parse("has(c) && !has(c)")).kind == "never"


def test_candidate_index_add_remove_round_trip() -> None:
    cands = SelectorCandidateIndex()
    cands.add("v", parse('a == "x"'))
    cands.add("p", parse("has(b)"))
    cands.add("u", parse("!has(a)"))
    cands.add("n", parse("a in {}"))
    assert cands.candidates({"a": "x", "b": ""}) == {"v", "p", "u"}
    assert cands.candidates({"a": "y"}) == {"u"}
    assert cands.unindexed_count == 1
    for sel_id in ("v", "p", "u", "n", "missing"):
        cands.remove(sel_id)
    assert len(cands) == 0
    assert cands.candidates({"a": "x", "b": ""}) == set()
    assert cands._by_value == {} and cands._by_present == {}


def test_candidate_index_pairs_need_both_labels() -> None:
    cands = SelectorCandidateIndex()
    cands.add("ab", parse('a == "x" && b in {"1", "2"}'))
    cands.add("ac", parse('a == "x" && c == "3"'))
    cands.add("ab2", parse('a == "y" && b == "1"'))
    assert cands.candidates({"a": "x", "b": "2"}) == {"ab"}
    assert cands.candidates({"a": "x", "b": "2", "c": "3"}) == {"ab", "ac"}
    assert cands.candidates({"a": "x"}) == set()
    assert cands.candidates({"a": "y", "b": "2"}) == set()
    cands.add("ab", parse('a == "y" && b == "2"'))  # re-filed elsewhere
    assert cands.candidates({"a": "x", "b": "2"}) == set()
    assert cands.candidates({"a": "y", "b": "2"}) == {"ab"}
    for sel_id in ("ab", "ac", "ab2"):
        cands.remove(sel_id)
    assert len(cands) == 0 and cands._by_pair == {}


def _counting(text: str) -> tuple:
    """A fresh selector whose evaluations are counted (the optimised index must skip items and
    selectors its indexes rule out; a silent fall-back to full scans would still be correct)."""
    sel = parse_uncached(text)
    calls = [0]
    compiled = sel.compiled

    def evaluate(labels) -> bool:
        calls[0] += 1
        return compiled(labels)

    sel.evaluate = evaluate
    return sel, calls


def test_optimised_new_selector_scans_only_candidate_items() -> None:
    index = SelectorIndex()
    index.update_parent_labels("kns.prod", {"ns": "prod"})
    for i in range(100):
        index.update_labels(f"e{i}", {"app": f"a{i % 10}"}, ["kns.prod"] if i < 5 else [])
    by_value, calls = _counting('app == "a1" && !has(x)')
    index.update_selector("v", by_value)
    assert calls[0] == 10
    by_parent_label, calls = _counting('ns == "prod"')
    index.update_selector("p", by_parent_label)
    assert calls[0] == 5
    assert index.items_matching("p") == {f"e{i}" for i in range(5)}


def test_optimised_item_change_evaluates_only_candidate_selectors() -> None:
    index = SelectorIndex()
    counters = []
    for i in range(50):
        sel, calls = _counting(f'app == "a{i}"')
        index.update_selector(i, sel)
        counters.append(calls)
    unindexed, unindexed_calls = _counting("!has(x)")
    index.update_selector("u", unindexed)
    index.update_labels("e", {"app": "a7"})
    assert [i for i, c in enumerate(counters) if c[0]] == [7]
    assert unindexed_calls[0] == 1
    assert index.selectors_matching("e") == {7, "u"}
