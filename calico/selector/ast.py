"""Selector syntax tree.

Nodes are frozen, hashable dataclasses so trees can be compared structurally in tests and shared
freely between threads. ``InSet`` keeps its values sorted and de-duplicated (the canonical form
and the unique ID depend on that), so build it with :meth:`InSet.of`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Op(enum.Enum):
    """Binary label/string operators; the value is the canonical spelling."""

    EQ = "=="
    NE = "!="
    CONTAINS = "contains"
    STARTS_WITH = "starts with"
    ENDS_WITH = "ends with"


@dataclass(frozen=True, slots=True)
class All:
    """``all()`` (and the empty selector): matches everything."""


@dataclass(frozen=True, slots=True)
class Global:
    """``global()``: matches everything; only meaningful before namespaceSelector rewriting."""


@dataclass(frozen=True, slots=True)
class Has:
    """``has(label)``: the label is present, with any value."""

    label: str


@dataclass(frozen=True, slots=True)
class Compare:
    """``label <op> "value"``."""

    label: str
    op: Op
    value: str


@dataclass(frozen=True, slots=True)
class InSet:
    """``label in {...}`` or, with ``negated``, ``label not in {...}``."""

    label: str
    values: tuple[str, ...]
    negated: bool = False

    @staticmethod
    def of(label: str, values: Iterable[str], negated: bool = False) -> InSet:
        """Build with the values sorted (code point order == UTF-8 byte order) and unique."""
        return InSet(label, tuple(sorted(set(values))), negated)


@dataclass(frozen=True, slots=True)
class Not:
    """``!operand``."""

    operand: Node


@dataclass(frozen=True, slots=True)
class And:
    """Two or more operands joined by ``&&`` at one parenthesis level (not flattened)."""

    operands: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or:
    """Two or more operands joined by ``||`` at one parenthesis level (not flattened)."""

    operands: tuple[Node, ...]


Node = All | Global | Has | Compare | InSet | Not | And | Or

ALL = All()
GLOBAL = Global()
