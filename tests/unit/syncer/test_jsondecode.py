"""``calico.syncer.jsondecode.fast`` answers None or what ``json.loads`` answers (types, float
signs and key order included), except that an integer outside [-2**63, 2**64) may come back
as a float: the one difference the WorkloadEndpoint lean processor's type checks rule out."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from calico.syncer import jsondecode


def _same(a: Any, b: Any) -> bool:
    """Structural identity: equal values of the same types, floats by repr (so -0.0 and NaN
    count), dict keys in the same order; ``a`` may hold a float for an out-of-range ``b``."""
    if type(a) is float and type(b) is int and not -(2**63) <= b < 2**64:
        return a == float(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _check(text: Any) -> None:
    got = jsondecode.fast(text)
    try:
        want = jsondecode.loads(text)
    except Exception:  # where the stdlib refuses, fast must too
        assert got is None, (text, got)
        return
    assert got is None or _same(got, want), (text, got, want)


def test_loads_is_the_stdlib() -> None:
    assert jsondecode.loads is json.loads


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=1500)
@given(json_values, st.booleans(), st.booleans(), st.sampled_from([None, 1, "\t"]))
def test_dumped_values_decode_as_the_stdlib_does(
    value: Any, ensure_ascii: bool, sort_keys: bool, indent: Any
) -> None:
    text = json.dumps(value, ensure_ascii=ensure_ascii, sort_keys=sort_keys, indent=indent)
    _check(text)
    if value is not None and not _has_special(value):
        assert jsondecode.fast(text) is not None  # the common case does take the fast path


def _has_special(value: Any) -> bool:
    """NaN/Infinity, a lone surrogate, or an out-of-range integer: orjson may refuse."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return not -(2**63) <= value < 2**64
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, dict):
        return any(_has_special(k) or _has_special(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_special(v) for v in value)
    return False


_PIECES = st.sampled_from(
    ['{"a":', '"x"', "1", "-0", "-0.0", "1e400", "1E-400", "NaN", "-Infinity", "[", "]", "{",
     "}", ",", ":", " ", "\n", "\ufeff", '"\\ud800"', '"\\udc00\\ud800"', '"\\u00e9"', "\x00",
     '"\x01"', "18446744073709551616", "-9223372036854775809", "9223372036854775807",
     "true", "nul", "0.1", "01", "1.", ".5", "\ud800", '"a":1,"a":2', "é"]
)  # fmt: skip


@settings(max_examples=3000)
@given(st.lists(_PIECES | st.text(max_size=3), max_size=12))
@example(['{"a":1,"a":2,"b":', "[", "1e400", "]", "}"])
@example(["[" * 2000 + "]" * 2000])
@example(['{"k":"\\ud800"}'])
@example(["\ufeff", "{}"])
def test_any_text_decodes_or_fails_as_the_stdlib_does(pieces: list[str]) -> None:
    _check("".join(pieces))


@pytest.mark.parametrize("text", [None, 1, b'{"a": 1}', bytearray(b"[1]"), memoryview(b"[1]")])
def test_other_inputs_answer_as_the_stdlib_does(text: Any) -> None:
    _check(text)


def test_stored_endpoint_documents() -> None:
    doc = {"metadata": {"name": "n", "labels": {"app": "x" * 300}}, "spec": {"ports": [1, 2.5]}}
    _check(json.dumps(doc, separators=(",", ":"), sort_keys=True))
