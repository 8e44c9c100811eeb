from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.durations import DurationError, format_duration, parse_duration


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.1, "100ms"),
        (20, "20s"),
        (90, "1m30s"),
        (3600, "1h0m0s"),
        (1.5, "1.5s"),
        (0.0000012, "1.2µs"),
        (5e-9, "5ns"),
        (-2, "-2s"),
        (3723.25, "1h2m3.25s"),
    ],
)
def test_format_like_go(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5s", 5),
        ("100ms", 0.1),
        ("1m30s", 90),
        ("1h", 3600),
        ("0", 0),
        ("1.5s", 1.5),
        ("2us", 2e-6),
        ("-1m", -60),
        ("1h2m3s4ms", 3723.004),
    ],
)
def test_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "s", "5x", "1m30", "abc", "--1s", "1.2.3s"])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(DurationError):
        parse_duration(text)


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_round_trip_nanoseconds(ns: int) -> None:
    assert round(parse_duration(format_duration(ns / 1e9)) * 1e9) == ns
