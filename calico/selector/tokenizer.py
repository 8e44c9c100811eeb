"""Tokenizer for the selector language.

The lexer is context sensitive, like upstream's: directly after a label only an operator may
follow (so ``contains contains "contains"`` is valid and ``a b`` is an error), everywhere else
keywords such as ``has(``/``all()`` are recognised and any other word is a label. Only space and
tab are whitespace between tokens; string literals have no escapes and may contain anything but
their own delimiter.
"""

from __future__ import annotations

import enum
import json
import re
from typing import NamedTuple

from calico.selector.errors import SelectorParseError

#: Maximum label length accepted by the tokenizer (upstream's limit).
MAX_LABEL_LENGTH = 512


class Kind(enum.Enum):
    """Token kinds."""

    LABEL = "label"
    STRING = "string"
    LPAREN = "("
    RPAREN = ")"
    LBRACE = "{"
    RBRACE = "}"
    COMMA = ","
    EQ = "=="
    NE = "!="
    IN = "in"
    NOT_IN = "not in"
    CONTAINS = "contains"
    STARTS_WITH = "starts with"
    ENDS_WITH = "ends with"
    NOT = "!"
    AND = "&&"
    OR = "||"
    HAS = "has"
    ALL = "all"
    GLOBAL = "global"
    EOF = "end of selector"


class Token(NamedTuple):
    """A token: its kind, its value (label name or string contents), and its source span."""

    kind: Kind
    value: str
    start: int
    end: int


_LABEL = f"[A-Za-z0-9_./-]{{1,{MAX_LABEL_LENGTH}}}"
_WS = "[ \t]*"

# Tried where an operand (or a punctuation mark) is expected. Alternation order matters: the
# has()/all()/global() keywords must win over the generic label rule.
_OPERAND_RE = re.compile(
    rf"""
      (?P<lparen>\() | (?P<rparen>\)) | (?P<lbrace>\{{) | (?P<rbrace>\}}) | (?P<comma>,)
    | "(?P<dq>[^"]*)" | '(?P<sq>[^']*)'
    | (?P<and>&&) | (?P<or>\|\|) | (?P<not>!)
    | has\({_WS}(?P<has>{_LABEL}){_WS}\)
    | (?P<all>all\({_WS}\))
    | (?P<global>global\({_WS}\))
    | (?P<label>{_LABEL})
    """,
    re.VERBOSE | re.ASCII,
)

# Tried directly after a label. Word operators need an (ASCII) word boundary after them;
# multi-word operators may have any run of spaces/tabs between the words, or none.
_OPERATOR_RE = re.compile(
    rf"""
      (?P<eq>==) | (?P<ne>!=)
    | (?P<not_in>not{_WS}in\b) | (?P<in>in\b)
    | (?P<contains>contains\b)
    | (?P<starts_with>starts{_WS}with\b) | (?P<ends_with>ends{_WS}with\b)
    """,
    re.VERBOSE | re.ASCII,
)

_SKIP_WS = re.compile(_WS)
_LABEL_CHAR = re.compile("[A-Za-z0-9_./-]")

_GROUP_KIND: dict[str, Kind] = {
    "lparen": Kind.LPAREN,
    "rparen": Kind.RPAREN,
    "lbrace": Kind.LBRACE,
    "rbrace": Kind.RBRACE,
    "comma": Kind.COMMA,
    "dq": Kind.STRING,
    "sq": Kind.STRING,
    "and": Kind.AND,
    "or": Kind.OR,
    "not": Kind.NOT,
    "has": Kind.HAS,
    "all": Kind.ALL,
    "global": Kind.GLOBAL,
    "label": Kind.LABEL,
    "eq": Kind.EQ,
    "ne": Kind.NE,
    "not_in": Kind.NOT_IN,
    "in": Kind.IN,
    "contains": Kind.CONTAINS,
    "starts_with": Kind.STARTS_WITH,
    "ends_with": Kind.ENDS_WITH,
}

# Groups whose captured text is the token's value (label name or string contents).
_VALUE_GROUPS = frozenset({"dq", "sq", "has", "label"})


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens, always ending with an EOF token.

    Raises SelectorParseError naming the offset of the first character that cannot start a
    token.
    """
    tokens: list[Token] = []
    append = tokens.append
    pos = _SKIP_WS.match(text).end()  # type: ignore[union-attr]
    n = len(text)
    after_label = False
    operand_match = _OPERAND_RE.match
    operator_match = _OPERATOR_RE.match
    skip = _SKIP_WS.match
    group_kind = _GROUP_KIND
    while pos < n:
        m = operator_match(text, pos) if after_label else operand_match(text, pos)
        if m is None:
            raise _bad_char(text, pos, tokens[-1] if after_label else None)
        group = m.lastgroup
        assert group is not None
        kind = group_kind[group]
        end = m.end()
        append(Token(kind, m.group(group) if group in _VALUE_GROUPS else "", pos, end))
        after_label = kind is Kind.LABEL
        pos = skip(text, end).end()  # type: ignore[union-attr]
    append(Token(Kind.EOF, "", n, n))
    return tokens


_KEYWORD_CALLS = {"has": "has(<label>)", "all": "all()", "global": "global()"}


def _bad_char(text: str, pos: int, label: Token | None) -> SelectorParseError:
    """Explain why no token starts at ``pos`` (``label`` is the label just before, if any)."""
    char = text[pos]
    shown = json.dumps(char, ensure_ascii=False)
    if label is not None:
        if char == "(" and label.value in _KEYWORD_CALLS:
            expected = _KEYWORD_CALLS[label.value]
            return SelectorParseError(
                text, label.start, f"malformed {label.value}(), expected {expected}"
            )
        if label.end - label.start == MAX_LABEL_LENGTH and _LABEL_CHAR.match(char):
            reason = f"label longer than {MAX_LABEL_LENGTH} characters"
        else:
            reason = f"expected an operator after label {json.dumps(label.value)} but found {shown}"
    elif char in "\"'":
        reason = "unterminated string literal"
    elif char in "=&|":
        reason = f"unexpected {shown} (operators are ==, &&, ||)"
    else:
        reason = f"unexpected {shown}"
    return SelectorParseError(text, pos, reason)
