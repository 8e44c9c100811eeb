"""Hypothesis strategies shared by the selector property tests: random ASTs, a noisy renderer
that turns an AST back into (non-canonical) selector text, and random label sets."""

from __future__ import annotations

import random

from hypothesis import strategies as st

from calico.selector.ast import ALL, GLOBAL, And, Compare, Has, InSet, Node, Not, Op, Or

LABELS = ["a", "b", "c", "d/e", "x.y-z_1", "contains", "in", "has", "all"]
VALUES = ["", "x", "y", "xy", "yx", '"', "'", "a b", "é", "in"]

SMALL_LABELS = ["a", "b", "c"]
SMALL_VALUES = ["", "x", "y", "xy"]


def leaves(labels: list[str], values: list[str]) -> st.SearchStrategy[Node]:
    label = st.sampled_from(labels)
    value = st.sampled_from(values)
    return st.one_of(
        st.builds(Compare, label, st.sampled_from(list(Op)), value),
        st.builds(InSet.of, label, st.lists(value, max_size=4), st.booleans()),
        st.builds(Has, label),
        st.just(ALL),
        st.just(GLOBAL),
    )


def nodes(labels: list[str] = LABELS, values: list[str] = VALUES) -> st.SearchStrategy[Node]:
    return st.recursive(
        leaves(labels, values),
        lambda children: st.one_of(
            st.builds(Not, children),
            st.builds(And, st.lists(children, min_size=2, max_size=4).map(tuple)),
            st.builds(Or, st.lists(children, min_size=2, max_size=4).map(tuple)),
        ),
        max_leaves=12,
    )


def label_sets(
    labels: list[str] = LABELS, values: list[str] = VALUES
) -> st.SearchStrategy[dict[str, str]]:
    return st.dictionaries(st.sampled_from(labels), st.sampled_from(values), max_size=len(labels))


_SPELLINGS = {
    Op.EQ: ["=="],
    Op.NE: ["!="],
    Op.CONTAINS: ["contains"],
    Op.STARTS_WITH: ["starts with", "startswith", "starts \t with"],
    Op.ENDS_WITH: ["ends with", "endswith", "ends  with"],
}


def _ws(rnd: random.Random) -> str:
    return rnd.choice(["", "", " ", "  ", "\t"])


def _quote(value: str, rnd: random.Random) -> str:
    styles = [q for q in "\"'" if q not in value]
    q = rnd.choice(styles)
    return f"{q}{value}{q}"


def render(node: Node, rnd: random.Random) -> str:
    """Render ``node`` as selector text that parses back to exactly ``node``, with random
    spacing, quote styles, operator spellings, redundant parentheses and ``!!`` pairs."""
    return _ws(rnd) + _render_or(node, rnd) + _ws(rnd)


def _render_or(node: Node, rnd: random.Random) -> str:
    if isinstance(node, Or):
        # An Or operand that is itself an Or must be parenthesised to stay nested.
        parts = [
            _paren(op, rnd) if isinstance(op, Or) else _render_and(op, rnd) for op in node.operands
        ]
        return (_ws(rnd) + "||" + _ws(rnd)).join(parts)
    return _render_and(node, rnd)


def _render_and(node: Node, rnd: random.Random) -> str:
    if isinstance(node, And):
        parts = [
            _paren(op, rnd) if isinstance(op, And | Or) else _render_op(op, rnd)
            for op in node.operands
        ]
        return (_ws(rnd) + "&&" + _ws(rnd)).join(parts)
    if isinstance(node, Or):
        return _paren(node, rnd)
    return _render_op(node, rnd)


def _paren(node: Node, rnd: random.Random) -> str:
    return "(" + _ws(rnd) + _render_or(node, rnd) + _ws(rnd) + ")"


def _render_op(node: Node, rnd: random.Random) -> str:
    """Render a single operation (never a bare And/Or)."""
    if isinstance(node, And | Or):
        return _paren(node, rnd)
    if isinstance(node, Not):
        inner = node.operand
        bangs = "!" + "!!" * rnd.randint(0, 1)
        if isinstance(inner, Not):
            # "!!x" would collapse; keep the double negation with parentheses.
            return bangs + _ws(rnd) + "(" + _render_or(inner, rnd) + ")"
        return bangs + _ws(rnd) + _render_op(inner, rnd)
    text = _render_leaf(node, rnd)
    if rnd.random() < 0.2:
        text = "!!" + _ws(rnd) + text
    if rnd.random() < 0.2:
        text = "(" + _ws(rnd) + text + _ws(rnd) + ")"
    return text


def _render_leaf(node: Node, rnd: random.Random) -> str:
    match node:
        case Compare(label, op, value):
            spelling = rnd.choice(_SPELLINGS[op])
            before = _ws(rnd) if op in (Op.EQ, Op.NE) else rnd.choice([" ", "\t", "  "])
            return f"{label}{before}{spelling}{_ws(rnd)}{_quote(value, rnd)}"
        case InSet(label, values, negated):
            keyword = rnd.choice(["not in", "notin", "not  in"]) if negated else "in"
            shuffled = list(values) + [v for v in values if rnd.random() < 0.3]
            rnd.shuffle(shuffled)
            items = ("," + _ws(rnd)).join(_quote(v, rnd) for v in shuffled)
            if shuffled and rnd.random() < 0.3:
                items += ","
            return f"{label} {keyword}{_ws(rnd)}{{{_ws(rnd)}{items}{_ws(rnd)}}}"
        case Has(label):
            return f"has({_ws(rnd)}{label}{_ws(rnd)})"
        case _:
            name = "all" if node == ALL else "global"
            return f"{name}({_ws(rnd)})"
