"""Tokenizer edge cases: whitespace, word boundaries, context-sensitive keywords, limits."""

from __future__ import annotations

import pytest

from calico.selector import SelectorParseError
from calico.selector.tokenizer import MAX_LABEL_LENGTH, Kind, tokenize


def kinds(text: str) -> list[Kind]:
    return [t.kind for t in tokenize(text)]


def test_empty_and_blank_input_is_just_eof() -> None:
    for text in ("", " ", "\t \t"):
        toks = tokenize(text)
        assert [t.kind for t in toks] == [Kind.EOF]
        assert toks[0].start == len(text)


def test_simple_comparison_spans_and_values() -> None:
    toks = tokenize('a == "b"')
    assert [(t.kind, t.value, t.start, t.end) for t in toks] == [
        (Kind.LABEL, "a", 0, 1),
        (Kind.EQ, "", 2, 4),
        (Kind.STRING, "b", 5, 8),
        (Kind.EOF, "", 8, 8),
    ]


@pytest.mark.parametrize(
    ("text", "op"),
    [
        ('a starts with "x"', Kind.STARTS_WITH),
        ('a startswith "x"', Kind.STARTS_WITH),
        ('a starts \t  with "x"', Kind.STARTS_WITH),
        ('a ends with "x"', Kind.ENDS_WITH),
        ('a endswith"x"', Kind.ENDS_WITH),
        ("a not in {}", Kind.NOT_IN),
        ("a notin {}", Kind.NOT_IN),
        ("a not\tin{}", Kind.NOT_IN),
        ("a in{}", Kind.IN),
        ('a contains"x"', Kind.CONTAINS),
        ('a!="x"', Kind.NE),
        ('a=="x"', Kind.EQ),
    ],
)
def test_operator_spellings(text: str, op: Kind) -> None:
    assert kinds(text)[1] is op


@pytest.mark.parametrize(
    "text", ['a inf {"x"}', 'a containsx "x"', 'a startswithx "x"', "a notinx {}"]
)
def test_word_operators_need_a_word_boundary(text: str) -> None:
    with pytest.raises(SelectorParseError) as info:
        tokenize(text)
    assert info.value.position == 2


def test_keywords_are_labels_outside_operator_position() -> None:
    assert kinds('contains contains "contains"') == [
        Kind.LABEL,
        Kind.CONTAINS,
        Kind.STRING,
        Kind.EOF,
    ]
    assert kinds('in in {"in"}')[:2] == [Kind.LABEL, Kind.IN]
    assert kinds('has == "x"')[:2] == [Kind.LABEL, Kind.EQ]
    assert kinds('all != "x"')[:2] == [Kind.LABEL, Kind.NE]
    assert kinds('global == "x"')[:2] == [Kind.LABEL, Kind.EQ]


def test_has_all_global_allow_inner_whitespace() -> None:
    toks = tokenize("has( \ta\t ) && all( ) && global(\t)")
    assert [t.kind for t in toks] == [
        Kind.HAS,
        Kind.AND,
        Kind.ALL,
        Kind.AND,
        Kind.GLOBAL,
        Kind.EOF,
    ]
    assert toks[0].value == "a"


def test_only_space_and_tab_are_whitespace() -> None:
    for ws in ("\n", "\r", "\f", "\v", "\u00a0"):
        with pytest.raises(SelectorParseError) as info:
            tokenize(f"has(a){ws}")
        assert info.value.position == 6


def test_strings_have_no_escapes_and_keep_anything_but_their_quote() -> None:
    toks = tokenize('a in {\'\\\', "it\'s", \'say "x"\', "\n\t"}')
    assert [t.value for t in toks if t.kind is Kind.STRING] == ["\\", "it's", 'say "x"', "\n\t"]


def test_label_length_limit() -> None:
    ok = "l" * MAX_LABEL_LENGTH
    assert tokenize(f'{ok} == "x"')[0].value == ok
    assert tokenize(f"has({ok})")[0].value == ok
    with pytest.raises(SelectorParseError) as info:
        tokenize(f'{ok}l == "x"')
    assert info.value.position == MAX_LABEL_LENGTH
    assert "longer than 512" in str(info.value)


def test_label_character_set() -> None:
    assert tokenize('aZ09_./- == "x"')[0].value == "aZ09_./-"
    for bad in ("a:b", "a@b", "é", "a+b"):
        with pytest.raises(SelectorParseError):
            tokenize(f'{bad} == "x"')


@pytest.mark.parametrize(
    ("text", "position", "fragment"),
    [
        ("a = 'b'", 2, 'found "="'),
        ("a == 'b' & has(c)", 9, 'unexpected "&"'),
        ("a == 'b' | has(c)", 9, 'unexpected "|"'),
        ("'unterminated", 0, "unterminated string"),
        ("a == 'b' && #", 12, 'unexpected "#"'),
    ],
)
def test_error_messages(text: str, position: int, fragment: str) -> None:
    with pytest.raises(SelectorParseError) as info:
        tokenize(text)
    assert info.value.position == position
    assert fragment in str(info.value)
