"""Per-label restrictions implied by a selector, for indexing (cf. upstream LabelRestrictions).

For every label set a selector matches, each restriction holds: ``must_be_present`` labels are
present, ``must_be_absent`` labels are absent, and a label with ``possible_values`` has one of
those values. The analysis is conservative (sound, not complete): it may omit a restriction but
never states a false one. An index can therefore skip every endpoint that violates a selector's
restrictions without evaluating it.

``!`` is pushed down with De Morgan's laws. ``&&`` merges (present/absent OR-ed, value sets
intersected); ``||`` keeps only what every satisfiable branch agrees on (present/absent AND-ed,
value sets unioned). A contradictory restriction (present and absent, or no possible value)
means the selector matches nothing; ``||`` drops such branches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from calico.selector.ast import All, And, Compare, Global, Has, InSet, Node, Not, Op, Or


@dataclass(frozen=True, slots=True)
class LabelRestriction:
    """What a selector requires of one label.

    ``possible_values`` is ``None`` for "any value"; when it is set, ``must_be_present`` is set
    too.
    """

    must_be_present: bool = False
    must_be_absent: bool = False
    possible_values: frozenset[str] | None = None

    @property
    def impossible(self) -> bool:
        """No label set can satisfy this restriction (so the selector matches nothing)."""
        return (self.must_be_present and self.must_be_absent) or self.possible_values == frozenset()

    def allows(self, labels: Mapping[str, str], label: str) -> bool:
        """Does ``labels`` satisfy this restriction on ``label``?"""
        if label in labels:
            if self.must_be_absent:
                return False
            return self.possible_values is None or labels[label] in self.possible_values
        return not self.must_be_present


Restrictions = dict[str, LabelRestriction]

_PRESENT = LabelRestriction(must_be_present=True)
_ABSENT = LabelRestriction(must_be_absent=True)


def label_restrictions(node: Node) -> Restrictions:
    """The restrictions every label set matched by ``node`` satisfies."""
    result = _analyse(node, negated=False)
    return {} if result is None else result


def _one_of(values: Iterable[str]) -> LabelRestriction:
    return LabelRestriction(must_be_present=True, possible_values=frozenset(values))


def _analyse(node: Node, negated: bool) -> Restrictions | None:
    """Restrictions for ``node`` (or ``!node``); ``None`` means it provably matches nothing."""
    match node:
        case Compare(label, op, value):
            if op is Op.EQ:
                return {} if negated else {label: _one_of((value,))}
            if op is Op.NE:
                # a != v holds when a is absent; !(a != v) means a is present and equals v.
                return {label: _one_of((value,))} if negated else {}
            # contains / starts with / ends with: false on absent labels.
            return {} if negated else {label: _PRESENT}
        case InSet(label, values, set_negated):
            if set_negated == negated:  # "in", or "!(not in)"
                return {label: _one_of(values)}
            return {}
        case Has(label):
            return {label: _ABSENT if negated else _PRESENT}
        case All() | Global():
            return None if negated else {}
        case Not(operand):
            return _analyse(operand, not negated)
        case And(operands):
            parts = [_analyse(op, negated) for op in operands]
            return _union_of(parts) if negated else _intersection_of(parts)
        case Or(operands):
            parts = [_analyse(op, negated) for op in operands]
            return _intersection_of(parts) if negated else _union_of(parts)
        case _:  # pragma: no cover - exhaustive over Node
            raise TypeError(f"not a selector node: {node!r}")


def _intersection_of(parts: list[Restrictions | None]) -> Restrictions | None:
    """Restrictions of a conjunction: everything any operand requires."""
    merged: Restrictions = {}
    for part in parts:
        if part is None:
            return None
        for label, r in part.items():
            prev = merged.get(label)
            merged[label] = r if prev is None else _both(prev, r)
    return merged


def _both(a: LabelRestriction, b: LabelRestriction) -> LabelRestriction:
    if a.possible_values is None:
        values = b.possible_values
    elif b.possible_values is None:
        values = a.possible_values
    else:
        values = a.possible_values & b.possible_values
    return LabelRestriction(
        must_be_present=a.must_be_present or b.must_be_present,
        must_be_absent=a.must_be_absent or b.must_be_absent,
        possible_values=values,
    )


def _union_of(parts: list[Restrictions | None]) -> Restrictions | None:
    """Restrictions of a disjunction: what every satisfiable operand agrees on."""
    live = [p for p in parts if p is not None and not any(r.impossible for r in p.values())]
    if not live:
        return None
    result = dict(live[0])
    for part in live[1:]:
        for label in list(result):
            other = part.get(label)
            combined = None if other is None else _either(result[label], other)
            if combined is None:
                del result[label]
            else:
                result[label] = combined
    return result


def _either(a: LabelRestriction, b: LabelRestriction) -> LabelRestriction | None:
    if a.possible_values is None or b.possible_values is None:
        values = None
    else:
        values = a.possible_values | b.possible_values
    r = LabelRestriction(
        must_be_present=a.must_be_present and b.must_be_present,
        must_be_absent=a.must_be_absent and b.must_be_absent,
        possible_values=values,
    )
    return None if r == LabelRestriction() else r
