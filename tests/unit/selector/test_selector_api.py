"""Public API behaviour: caching, equality, validation helpers, deep nesting, errors."""

from __future__ import annotations

import pickle

import pytest

from calico.selector import (
    Selector,
    SelectorParseError,
    compiler,
    make_unique_id,
    normalise,
    parse,
    parse_uncached,
    validate,
)
from calico.selector.compiler import python_expression
from calico.selector.parser import MAX_NESTING


def test_parse_is_cached_and_selectors_compare_by_canonical_form() -> None:
    assert parse('a == "b"') is parse('a == "b"')
    a, b = parse("a == 'b' && has(c)"), parse('(a=="b"&&has( c ))')
    assert a == b and hash(a) == hash(b)
    assert a != parse("has(c) && a == 'b'")
    assert len({a, b, parse("")}) == 2
    assert parse("") == parse("all()")
    assert a.text == "a == 'b' && has(c)"
    assert repr(a) == "Selector('(a == \"b\" && has(c))')"
    assert isinstance(a, Selector)
    assert (a == "x") is False


def test_evaluate_rebinds_to_compiled_function() -> None:
    sel = parse_uncached('a in {"x", "y"}')
    assert sel.evaluate({"a": "x"}) is True
    assert sel.evaluate is sel.compiled
    assert sel.evaluate({"a": "z"}) is False


def test_validate_and_normalise() -> None:
    validate("has(a)")
    validate("")
    with pytest.raises(SelectorParseError):
        validate("has(a")
    assert normalise("! (has( b)||! has(a ))") == "!(has(b) || !has(a))"
    assert normalise("not a selector") == "not a selector"


def test_error_shape_and_pickling() -> None:
    with pytest.raises(SelectorParseError) as info:
        parse('a == "b" && x')
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.selector, err.position) == ('a == "b" && x', 13)
    assert str(err) == (
        'invalid selector "a == \\"b\\" && x": expected an operator after label "x" '
        "but found end of selector at position 13"
    )
    clone = pickle.loads(pickle.dumps(err))
    assert (clone.selector, clone.position, str(clone)) == (err.selector, err.position, str(err))


def test_make_unique_id_matches_selector_ids() -> None:
    assert make_unique_id("s", "all()") == "s:5y5I3VdRZfDU01O--xXAPx2yxCQQqMf0M6IWug"
    assert parse_uncached("a == '\ud800'").unique_id.startswith("s:")  # lone surrogate: no crash


def test_nesting_limit() -> None:
    ok = "(" * MAX_NESTING + "has(a)" + ")" * MAX_NESTING
    assert parse_uncached(ok).evaluate({"a": "x"})
    too_deep = "(" * (MAX_NESTING + 1) + "has(a)" + ")" * (MAX_NESTING + 1)
    with pytest.raises(SelectorParseError) as info:
        parse_uncached(too_deep)
    assert info.value.position == MAX_NESTING


def test_deep_selector_compiles_and_agrees_with_interpreter() -> None:
    text = "has(z)"
    for i in range(MAX_NESTING):
        text = f"!(has(l{i}) || {text} && has(m{i}))"
    sel = parse_uncached(text)
    for labels in ({}, {"z": ""}, {"l0": ""}, {"z": "", "m0": ""}):
        assert sel.compiled(labels) is sel.evaluate_interpreted(labels)
    assert sel.unique_id.startswith("s:")
    assert sel.label_restrictions[f"l{MAX_NESTING - 1}"].must_be_absent


def test_compiler_falls_back_to_closures(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(node: object) -> str:
        raise RecursionError("too deep")

    monkeypatch.setattr(compiler, "python_expression", refuse)
    fn = compiler.compile_selector(parse_uncached('a == "b" || !has(c)').root)
    assert fn.__qualname__.startswith("compile_closures")
    assert fn({"a": "b", "c": ""}) and fn({}) and not fn({"c": ""})


def test_generated_source_quotes_every_string() -> None:
    src = python_expression(parse_uncached("a == \"'); import os; ('\"").root)
    assert src == "L.get('a') == \"'); import os; ('\""
    assert parse_uncached("a == \"'); import os; ('\"").evaluate({"a": "'); import os; ('"})


def test_label_restrictions_are_read_only() -> None:
    sel = parse_uncached("has(a)")
    with pytest.raises(TypeError):
        sel.label_restrictions["b"] = sel.label_restrictions["a"]  # type: ignore[index]


def test_selector_pickles_as_text() -> None:
    sel = parse_uncached("a in {'x'} || !has(b)")
    assert sel.evaluate({"a": "x"})
    clone = pickle.loads(pickle.dumps(sel))
    assert clone == sel and clone.text == sel.text
    assert clone.evaluate({"b": ""}) is False
