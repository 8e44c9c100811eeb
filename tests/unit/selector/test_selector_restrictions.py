"""Label restrictions: documented examples plus an exhaustive soundness property."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from selector_strategies import SMALL_LABELS, SMALL_VALUES, nodes

from calico.selector import LabelRestriction, parse_uncached
from calico.selector.ast import Node
from calico.selector.interpreter import evaluate
from calico.selector.restrictions import label_restrictions

P = LabelRestriction(must_be_present=True)
A = LabelRestriction(must_be_absent=True)


def V(*values: str) -> LabelRestriction:
    return LabelRestriction(must_be_present=True, possible_values=frozenset(values))


CASES: list[tuple[str, dict[str, LabelRestriction]]] = [
    ("", {}),
    ("all()", {}),
    ("global()", {}),
    ("a == 'value'", {"a": V("value")}),
    ("has(a)", {"a": P}),
    ("a in {'v1','v2'}", {"a": V("v1", "v2")}),
    ("a not in {'v1','v2'}", {}),
    ("a contains 'foo'", {"a": P}),
    ("a starts with 'foo'", {"a": P}),
    ("a ends with 'foo'", {"a": P}),
    ("a != 'value'", {}),
    ("a == 'v1' && a == 'v1'", {"a": V("v1")}),
    ("a == 'v1' && a == 'v2'", {"a": V()}),
    ("a == 'v1' && has(a)", {"a": V("v1")}),
    ("a in {'v1','v2'} && a in {'v2','v3'}", {"a": V("v2")}),
    ("has(a) && !has(a)", {"a": LabelRestriction(True, True, None)}),
    ("a == 'v1' && b == 'v2'", {"a": V("v1"), "b": V("v2")}),
    ("all() && a == 'v1'", {"a": V("v1")}),
    ("a == 'v1' || a == 'v2'", {"a": V("v1", "v2")}),
    ("has(a) || a == 'v2'", {"a": P}),
    ("a == 'v2' || has(b)", {}),
    ("a == 'v2' || (has(b) && has(a))", {"a": P}),
    ("a == 'v1' || all()", {}),
    ("!(a == 'value')", {}),
    ("!has(a)", {"a": A}),
    ("!!has(a)", {"a": P}),
    ("!(!has(a))", {"a": P}),
    ("!(a != 'x')", {"a": V("x")}),
    ("!(a not in {'x', 'y'})", {"a": V("x", "y")}),
    ("!(has(a) || has(b))", {"a": A, "b": A}),
    ("!(has(a) && has(b))", {}),
    ("!has(a) || !has(a) && has(b)", {"a": A}),
    # Unsatisfiable branches of an || are ignored.
    ("(a == 'x' && a == 'y') || b == 'z'", {"b": V("z")}),
    ("!all() || has(c)", {"c": P}),
]


@pytest.mark.parametrize(("selector", "expected"), CASES)
def test_restriction_examples(selector: str, expected: dict[str, LabelRestriction]) -> None:
    sel = parse_uncached(selector)
    assert dict(sel.label_restrictions) == expected
    # An extra "all() &&" changes nothing.
    assert dict(parse_uncached(f"all() && ({selector or 'all()'})").label_restrictions) == expected


def test_impossible_flag() -> None:
    assert V().impossible
    assert LabelRestriction(True, True, None).impossible
    assert not P.impossible and not A.impossible and not V("x").impossible


# Every label set over a small universe: absent or one of the values, per label.
UNIVERSE = [
    {k: v for k, v in zip(SMALL_LABELS, combo, strict=True) if v is not None}
    for combo in itertools.product([None, *SMALL_VALUES], repeat=len(SMALL_LABELS))
]


@settings(deadline=None, max_examples=300)
@given(nodes(SMALL_LABELS, SMALL_VALUES))
def test_restrictions_are_sound(node: Node) -> None:
    restrictions = label_restrictions(node)
    for labels in UNIVERSE:
        if evaluate(node, labels):
            for label, r in restrictions.items():
                assert not r.impossible
                assert r.allows(labels, label), (labels, label, r)
