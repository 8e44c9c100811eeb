"""Table-driven tests written from the documented selector semantics (felix.md §2)."""

from __future__ import annotations

import pytest

from calico.selector import SelectorParseError, parse, parse_uncached, validate

# (selector, labels, expected match)
MATCH_CASES: list[tuple[str, dict[str, str], bool]] = [
    ('a == "b"', {"a": "b", "c": "d"}, True),
    ('a == "b"', {}, False),
    ('a == "b"', {"a": "c"}, False),
    ('a == "b"', {"c": "d"}, False),
    ("a == ''", {"a": ""}, True),
    ("a == ''", {}, False),
    ("a != 'a'", {}, True),
    ("a != 'a'", {"a": "a"}, False),
    ('a != "b"', {"a": "a"}, True),
    ('a != ""', {"a": ""}, False),
    ('a in {"\'", \'"\', "c"}', {"a": '"'}, True),
    ('a in {"\'", \'"\', "c"}', {"a": "'"}, True),
    ('a in {"\'", \'"\', "c"}', {}, False),
    ('a in {"a", "b"}', {"a": "c"}, False),
    ('a in {"a", "b"}', {"a": "b"}, True),
    ("a in {}", {"a": ""}, False),
    ("a in {}", {}, False),
    ('a not in {"d", "e"}', {"a": "a"}, True),
    ('a not in {"d", "e"}', {"a": "d"}, False),
    ('a not in {"\'", \'"\', "c"}', {}, True),
    ("a not in {}", {}, True),
    ("a not in {}", {"a": "x"}, True),
    ('!a in {"a"}', {"a": "b"}, True),
    ('!a in {"a"}', {}, True),
    ('!a in {"a"}', {"a": "a"}, False),
    ("has(a)", {"a": "b"}, True),
    ("has(a)", {"a": ""}, True),
    ("has(a)", {"b": "a"}, False),
    ("!has(a)", {"b": "b"}, True),
    ("!!has(b)", {"a": "b"}, False),
    ("!! ! has(a)", {"a": "b"}, False),
    ("! !!has(a)", {"a": "b"}, False),
    ("!(!has(a))", {"a": "b"}, True),
    ("", {"a": "b"}, True),
    (" ", {}, True),
    (" \t ", {"a": "b"}, True),
    (" all()", {}, True),
    ("all( )", {"x": "y"}, True),
    ("global()", {"a": "b"}, True),
    ("!all()", {}, False),
    ("!global()", {"a": "b"}, False),
    ('a contains "a"', {"a": "bab"}, True),
    ('a contains "a"', {"b": "aaa"}, False),
    ('a contains ""', {"a": ""}, True),
    ('a contains ""', {}, False),
    ('a starts with "a"', {"a": "baa"}, False),
    ('a starts with "a"', {"a": "abb"}, True),
    ("a starts with ''", {}, False),
    ('a ends with "a"', {"a": "bba"}, True),
    ('a ends with "a"', {"a": "aab"}, False),
    ('a ends with ""', {"a": "zz"}, True),
    ('!a contains "x"', {}, True),
    ("a == 'a1' && b != 'b1'", {"a": "a1", "b": "b1"}, False),
    ("!a == 'a1' && b == 'b1'", {"a": "a1", "b": "b1"}, False),
    ("!a == 'a1' && b == 'b1'", {"b": "b1"}, True),
    ("a == 'a1' || b != 'b1'", {"a": "a1", "b": "b1"}, True),
    ("! a == 'a1' || ! b == 'b1'", {"a": "a1", "b": "b1"}, False),
    ("!(!has(a) || has(b))", {"a": "a"}, True),
    ("has(a) && !has(b)", {"a": "a"}, True),
    ("has(a) && !has(b)", {"a": "a", "b": ""}, False),
    ('a == "1" || b == "2" && c == "3"', {"a": "1"}, True),
    ('a == "1" || b == "2" && c == "3"', {"b": "2"}, False),
    ('(a == "1" || b == "2") && c == "3"', {"a": "1"}, False),
    ('(a == "1" || b == "2") && c == "3"', {"b": "2", "c": "3"}, True),
    ('contains contains "contains"', {"contains": "xcontainsx"}, True),
    ('in in {"in"}', {"in": "in"}, True),
    ('has == "x"', {"has": "x"}, True),
    ('all != "x"', {}, True),
    ('a.b/c-d_e == "v"', {"a.b/c-d_e": "v"}, True),
    ('projectcalico.org/namespace == "ns1"', {"projectcalico.org/namespace": "ns1"}, True),
    ('a=="b"&&c!="d"', {"a": "b"}, True),
    ('a contains"x"', {"a": "axa"}, True),
    ('a startswith"x"', {"a": "xa"}, True),
    ("a notin{'x'}", {"a": "y"}, True),
    ("a in{'x',}", {"a": "x"}, True),
    ('a == "it\'s"', {"a": "it's"}, True),
    ("a == 'say \"hi\"'", {"a": 'say "hi"'}, True),
    ('a == "with\nnewline"', {"a": "with\nnewline"}, True),
    ('a == "é"', {"a": "é"}, True),
]


@pytest.mark.parametrize(("selector", "labels", "expected"), MATCH_CASES)
def test_match_table(selector: str, labels: dict[str, str], expected: bool) -> None:
    sel = parse_uncached(selector)
    assert sel.evaluate(labels) is expected
    assert sel.evaluate_interpreted(labels) is expected
    # Canonicalising must not change the meaning.
    assert parse_uncached(sel.canonical).evaluate_interpreted(labels) is expected


# (selector, expected error position)
ERROR_CASES: list[tuple[str, int]] = [
    ("b == b", 5),
    ("b contains b", 11),
    ("b starts with b", 14),
    ("b ends with b", 12),
    ("'b1' == b", 5),
    ("b", 1),
    ("a b", 2),
    ("!", 1),
    ('foo == "bar" &', 13),
    ('foo == "bar" |', 13),
    ("foo != ||", 7),
    ('foo in {"", ||', 12),
    ('foo in ""', 7),
    ('"FOO', 0),
    ("\"FOO'", 0),
    ("'FOO", 0),
    ('a == "FOO', 5),
    ("(", 1),
    ('(a == "foo"', 11),
    (")", 0),
    ("()", 1),
    ("%", 0),
    ('a == "b" && %', 12),
    ('a == "b" || %', 12),
    ("a ", 2),
    ("has(foo) &&", 11),
    ('label = "value"', 6),
    ("all(", 0),
    ("has(foo", 0),
    ("has()", 0),
    ("has (a)", 0),
    ('label squiggles "v"', 6),
    ("a" * 513 + ' == "x"', 512),
    ("has(" + "a" * 513 + ")", 0),
    ('a == "b"\n', 8),
    ('a == "b"\r', 8),
    ('a ==\n"b"', 4),
    ('a inf {"x"}', 2),
    ('a containsx "x"', 2),
    ("a in {,}", 6),
    ('a in {"x",,}', 10),
    ('a in {"x" "y"}', 10),
    ('a in {"x"', 9),
    ('a == "b" c == "d"', 9),
    ('a == "b" &&& c == "d"', 11),
    ('a == "b" || || c == "d"', 12),
    ('a == "b")', 8),
    ("!=", 1),
    ('a = = "b"', 2),
    ('a === "b"', 4),
    ('a == "b" == "c"', 9),
    ('a not "b"', 2),
    ('a starts "b"', 2),
]


@pytest.mark.parametrize(("selector", "position"), ERROR_CASES)
def test_error_table(selector: str, position: int) -> None:
    with pytest.raises(SelectorParseError) as info:
        parse_uncached(selector)
    err = info.value
    assert err.selector == selector
    assert err.position == position, str(err)
    assert str(err).startswith("invalid selector ")
    assert str(err).endswith(f"at position {position}")
    with pytest.raises(SelectorParseError):
        validate(selector)


CANONICAL_CASES: list[tuple[str, str]] = [
    ("", "all()"),
    (" \t", "all()"),
    (" all() ", "all()"),
    (" (all() )", "all()"),
    ("global( )", "global()"),
    ("! (has( b)||! has(a ))", "!(has(b) || !has(a))"),
    ('! (a == "b"&&! c != "d")', '!(a == "b" && !c != "d")'),
    ('a == "\'"', 'a == "\'"'),
    ("a == '\"'", "a == '\"'"),
    ("a contains '\"'", "a contains '\"'"),
    ("a startswith '\"'", "a starts with '\"'"),
    ('a endswith "\'"', 'a ends with "\'"'),
    ("a!='\"'", "a != '\"'"),
    ("a == 'b'", 'a == "b"'),
    ('a in {"d", "a", "b"}', 'a in {"a", "b", "d"}'),
    ('a in {"z", "z", "x", "y", "x", "a"}', 'a in {"a", "x", "y", "z"}'),
    ("a not in {'b', 'a',}", 'a not in {"a", "b"}'),
    ("a in { }", "a in {}"),
    ("a in {'\"', \"'\"}", "a in {'\"', \"'\"}"),
    ("!(k == 'v')", '!k == "v"'),
    ("!!k == 'v'", 'k == "v"'),
    ("!(!has(a))", "!!has(a)"),
    ("k == 'v' && x == 'y'", '(k == "v" && x == "y")'),
    ("k == 'v' || has(x)", '(k == "v" || has(x))'),
    ("a == 'x' && b == 'y' && c == 'z'", '(a == "x" && b == "y" && c == "z")'),
    ("(a == 'x' && b == 'y') && c == 'z'", '((a == "x" && b == "y") && c == "z")'),
    ("a == 'x' || b == 'y' && c == 'z'", '(a == "x" || (b == "y" && c == "z"))'),
    (
        "!(!(k == 'v' && has(t) || all()) && (a in {'b', 'c'}))",
        '!(!((k == "v" && has(t)) || all()) && a in {"b", "c"})',
    ),
    ("((((has(a)))))", "has(a)"),
    ("a  not  in {'x'}", 'a not in {"x"}'),
]


@pytest.mark.parametrize(("selector", "expected"), CANONICAL_CASES)
def test_canonical_table(selector: str, expected: str) -> None:
    sel = parse_uncached(selector)
    assert sel.canonical == expected
    assert sel.string() == expected
    assert str(sel) == expected


UID_CASES = [
    ("", "s:5y5I3VdRZfDU01O--xXAPx2yxCQQqMf0M6IWug"),
    ("all()", "s:5y5I3VdRZfDU01O--xXAPx2yxCQQqMf0M6IWug"),
    (" (all() )", "s:5y5I3VdRZfDU01O--xXAPx2yxCQQqMf0M6IWug"),
    ("! (has( b)||! has(a ))", "s:Iss0uCleLYv1GSv_pNm7hAO58kE9jAx1NKyG3Q"),
    ('! (a == "b"&&! c != "d")', "s:lh3haoY1ikTRkd4UZu0nWSaIBknYLPJLX16d-w"),
]


@pytest.mark.parametrize(("selector", "uid"), UID_CASES)
def test_worked_unique_ids(selector: str, uid: str) -> None:
    sel = parse(selector)
    assert sel.unique_id == uid
    assert parse(sel.canonical).unique_id == uid
