"""Property tests: round trips through text, compiled == interpreted, canonical stability."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from selector_strategies import label_sets, nodes, render

from calico.selector import parse_uncached
from calico.selector.ast import And, Node, Not, Or
from calico.selector.canonical import canonical
from calico.selector.compiler import compile_closures, compile_selector
from calico.selector.interpreter import evaluate

PROPS = settings(deadline=None, max_examples=300)


def has_double_negation(node: Node) -> bool:
    if isinstance(node, Not):
        return isinstance(node.operand, Not) or has_double_negation(node.operand)
    if isinstance(node, And | Or):
        return any(has_double_negation(op) for op in node.operands)
    return False


@PROPS
@given(nodes(), st.randoms(use_true_random=False))
def test_noisy_rendering_parses_back_to_the_same_tree(node: Node, rnd: random.Random) -> None:
    text = render(node, rnd)
    assert parse_uncached(text).root == node, text


@PROPS
@given(nodes())
def test_canonical_round_trip_is_stable(node: Node) -> None:
    c1 = canonical(node)
    s2 = parse_uncached(c1)
    c2 = s2.canonical
    # Upstream renders !(!x) as "!!x", which re-parses as x; everything else is a fixed point.
    if not has_double_negation(node):
        assert s2.root == node
        assert c2 == c1
    assert parse_uncached(c2).canonical == c2


@PROPS
@given(nodes(), st.lists(label_sets(), min_size=1, max_size=8))
def test_compiled_matches_interpreter(node: Node, labelss: list[dict[str, str]]) -> None:
    compiled = compile_selector(node)
    closures = compile_closures(node)
    reparsed = parse_uncached(canonical(node))
    for labels in labelss:
        expected = evaluate(node, labels)
        assert compiled(labels) is expected
        assert closures(labels) is expected
        assert reparsed.evaluate(labels) is expected
