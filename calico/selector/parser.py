"""Recursive-descent parser: tokens -> AST.

Precedence is ``||`` < ``&&`` < ``!``; a run of ``!`` applies to the single following operation
and collapses by parity (``!!x`` parses as ``x``), but ``!(!x)`` keeps both negations, as
upstream does (its canonical form is ``!!x``).
"""

from __future__ import annotations

import json

from calico.selector.ast import ALL, GLOBAL, And, Compare, Has, InSet, Node, Not, Op, Or
from calico.selector.errors import SelectorParseError
from calico.selector.tokenizer import Kind, Token, tokenize

#: Deepest parenthesis nesting accepted. Upstream has no limit; we need one so that parsing,
#: evaluation and rendering (all recursive) stay far from Python's recursion limit.
MAX_NESTING = 100

_COMPARE_OPS = {
    Kind.EQ: Op.EQ,
    Kind.NE: Op.NE,
    Kind.CONTAINS: Op.CONTAINS,
    Kind.STARTS_WITH: Op.STARTS_WITH,
    Kind.ENDS_WITH: Op.ENDS_WITH,
}


def parse_ast(text: str) -> Node:
    """Parse ``text`` into an AST; the empty/whitespace-only selector is ``all()``."""
    return _Parser(text, tokenize(text)).parse()


class _Parser:
    """Walks the token list once; holds the cursor."""

    def __init__(self, text: str, tokens: list[Token]) -> None:
        self.text = text
        self.tokens = tokens
        self.i = 0

    def parse(self) -> Node:
        if self.tokens[0].kind is Kind.EOF:
            return ALL
        node = self._or(0)
        tok = self.tokens[self.i]
        if tok.kind is not Kind.EOF:
            raise self._error(tok, 'expected "&&", "||" or end of selector')
        return node

    def _error(self, tok: Token, expected: str) -> SelectorParseError:
        if tok.kind is Kind.EOF:
            found = "end of selector"
        else:
            found = json.dumps(self.text[tok.start : tok.end], ensure_ascii=False)
        return SelectorParseError(self.text, tok.start, f"{expected} but found {found}")

    def _or(self, depth: int) -> Node:
        operands = [self._and(depth)]
        tokens = self.tokens
        while tokens[self.i].kind is Kind.OR:
            self.i += 1
            operands.append(self._and(depth))
        return operands[0] if len(operands) == 1 else Or(tuple(operands))

    def _and(self, depth: int) -> Node:
        operands = [self._operation(depth)]
        tokens = self.tokens
        while tokens[self.i].kind is Kind.AND:
            self.i += 1
            operands.append(self._operation(depth))
        return operands[0] if len(operands) == 1 else And(tuple(operands))

    def _operation(self, depth: int) -> Node:
        tokens = self.tokens
        negated = False
        tok = tokens[self.i]
        while tok.kind is Kind.NOT:
            negated = not negated
            self.i += 1
            tok = tokens[self.i]
        self.i += 1
        kind = tok.kind
        node: Node
        if kind is Kind.LABEL:
            node = self._label_operation(tok)
        elif kind is Kind.HAS:
            node = Has(tok.value)
        elif kind is Kind.ALL:
            node = ALL
        elif kind is Kind.GLOBAL:
            node = GLOBAL
        elif kind is Kind.LPAREN:
            if depth >= MAX_NESTING:
                raise SelectorParseError(
                    self.text, tok.start, f"parentheses nested deeper than {MAX_NESTING}"
                )
            node = self._or(depth + 1)
            close = tokens[self.i]
            if close.kind is not Kind.RPAREN:
                raise self._error(close, 'expected ")"')
            self.i += 1
        else:
            raise self._error(tok, 'expected a label, "has(", "all()", "global()", "!" or "("')
        return Not(node) if negated else node

    def _label_operation(self, label: Token) -> Node:
        tokens = self.tokens
        op = tokens[self.i]
        self.i += 1
        compare_op = _COMPARE_OPS.get(op.kind)
        if compare_op is not None:
            value = tokens[self.i]
            if value.kind is not Kind.STRING:
                raise self._error(value, f'expected a quoted string after "{compare_op.value}"')
            self.i += 1
            return Compare(label.value, compare_op, value.value)
        if op.kind is Kind.IN or op.kind is Kind.NOT_IN:
            return InSet.of(label.value, self._string_set(op), op.kind is Kind.NOT_IN)
        raise self._error(op, f"expected an operator after label {json.dumps(label.value)}")

    def _string_set(self, op: Token) -> list[str]:
        """Parse ``{ [str ("," str)* [","]] }``; a trailing comma is allowed."""
        tokens = self.tokens
        brace = tokens[self.i]
        if brace.kind is not Kind.LBRACE:
            raise self._error(brace, f'expected "{{" after "{op.kind.value}"')
        self.i += 1
        values: list[str] = []
        if tokens[self.i].kind is Kind.RBRACE:
            self.i += 1
            return values
        while True:
            tok = tokens[self.i]
            if tok.kind is not Kind.STRING:
                raise self._error(tok, "expected a quoted string in set")
            values.append(tok.value)
            self.i += 1
            sep = tokens[self.i]
            self.i += 1
            if sep.kind is Kind.RBRACE:
                return values
            if sep.kind is not Kind.COMMA:
                raise self._error(sep, 'expected "," or "}" in set')
            if tokens[self.i].kind is Kind.RBRACE:
                self.i += 1
                return values
