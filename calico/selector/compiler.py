"""Compile an AST into a fast Python callable.

The tree becomes one Python expression over a label mapping ``L`` (e.g. ``L.get('a') == 'b' and
'c' in L``) which is turned into a function with ``eval``. A single flat expression avoids a
Python call per node, which is where the tree walker spends its time. Every string from the
selector enters the source via ``repr()`` (a str repr is always an exact, inert literal), so
selector text can never inject code.

Absent-label semantics fall out of ``Mapping.get``: ``None`` equals no string and is in no set,
so ``==``/``in`` are false and ``!=``/``not in`` true. ``contains``/``starts with``/``ends with``
use ``L.get(k, "")``, which is exact for non-empty needles; an empty needle degrades to a
presence test.

Python caps how deeply an expression can nest, so very deep selectors fall back to composed
closures (slower, same semantics).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from calico.selector.ast import All, And, Compare, Global, Has, InSet, Node, Not, Op, Or

Evaluator = Callable[[Mapping[str, str]], bool]


def compile_selector(node: Node) -> Evaluator:
    """Return a function ``labels -> bool`` equivalent to the interpreter on ``node``."""
    try:
        source = "lambda L: " + python_expression(node)
        fn = eval(compile(source, "<selector>", "eval"), {"__builtins__": {}})
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return compile_closures(node)
    return fn  # type: ignore[no-any-return]


def python_expression(node: Node) -> str:
    """The Python expression (over mapping ``L``) that evaluates ``node``."""
    match node:
        case Compare(label, op, value):
            k, v = repr(label), repr(value)
            if op is Op.EQ:
                return f"L.get({k}) == {v}"
            if op is Op.NE:
                return f"L.get({k}) != {v}"
            if not value:
                return f"{k} in L"
            if op is Op.CONTAINS:
                return f"{v} in L.get({k}, '')"
            method = "startswith" if op is Op.STARTS_WITH else "endswith"
            return f"L.get({k}, '').{method}({v})"
        case InSet(label, values, negated):
            if not values:
                return "True" if negated else "False"
            keyword = "not in" if negated else "in"
            # A constant set literal is folded by CPython into a frozenset constant.
            return f"L.get({label!r}) {keyword} {{{', '.join(map(repr, values))}}}"
        case Has(label):
            return f"{label!r} in L"
        case All() | Global():
            return "True"
        case Not(operand):
            return f"not {python_expression(operand)}"
        case And(operands):
            return "(" + " and ".join(map(python_expression, operands)) + ")"
        case Or(operands):
            return "(" + " or ".join(map(python_expression, operands)) + ")"
        case _:  # pragma: no cover - exhaustive over Node
            raise TypeError(f"not a selector node: {node!r}")


def _true(_labels: Mapping[str, str]) -> bool:
    return True


def compile_closures(node: Node) -> Evaluator:
    """Fallback compiler: one closure per node, no Python source involved."""
    match node:
        case Compare(label, op, value):
            if op is Op.EQ:
                return lambda labels: labels.get(label) == value
            if op is Op.NE:
                return lambda labels: labels.get(label) != value
            if not value:
                return lambda labels: label in labels
            if op is Op.CONTAINS:
                return lambda labels: value in labels.get(label, "")
            if op is Op.STARTS_WITH:
                return lambda labels: labels.get(label, "").startswith(value)
            return lambda labels: labels.get(label, "").endswith(value)
        case InSet(label, values, negated):
            members = frozenset(values)
            if negated:
                return lambda labels: labels.get(label) not in members
            return lambda labels: labels.get(label) in members
        case Has(label):
            return lambda labels: label in labels
        case All() | Global():
            return _true
        case Not(operand):
            inner = compile_closures(operand)
            return lambda labels: not inner(labels)
        case And(operands):
            parts = tuple(map(compile_closures, operands))
            return lambda labels: all(part(labels) for part in parts)
        case Or(operands):
            parts = tuple(map(compile_closures, operands))
            return lambda labels: any(part(labels) for part in parts)
        case _:  # pragma: no cover - exhaustive over Node
            raise TypeError(f"not a selector node: {node!r}")
