"""Plain tree-walking evaluator: the readable oracle the compiled evaluator is checked against.

Written for obviousness rather than speed: each rule below is a direct transcription of the
documented semantics (absent labels make ``!=``/``not in`` true and every other operator false).
"""

from __future__ import annotations

from collections.abc import Mapping

from calico.selector.ast import All, And, Compare, Global, Has, InSet, Node, Not, Op, Or


def evaluate(node: Node, labels: Mapping[str, str]) -> bool:
    """Does ``node`` match ``labels``?"""
    match node:
        case Compare(label, op, value):
            if label not in labels:
                return op is Op.NE
            actual = labels[label]
            if op is Op.EQ:
                return actual == value
            if op is Op.NE:
                return actual != value
            if op is Op.CONTAINS:
                return value in actual
            if op is Op.STARTS_WITH:
                return actual.startswith(value)
            return actual.endswith(value)
        case InSet(label, values, negated):
            if label not in labels:
                return negated
            return (labels[label] in values) != negated
        case Has(label):
            return label in labels
        case All() | Global():
            return True
        case Not(operand):
            return not evaluate(operand, labels)
        case And(operands):
            return all(evaluate(operand, labels) for operand in operands)
        case Or(operands):
            return any(evaluate(operand, labels) for operand in operands)
        case _:  # pragma: no cover - exhaustive over Node
            raise TypeError(f"not a selector node: {node!r}")
