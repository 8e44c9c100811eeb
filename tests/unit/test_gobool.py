"""Go's strconv.ParseBool spellings (calico.gobool), shared by the env-var parsers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.gobool import GO_FALSE, GO_TRUE, go_bool


@pytest.mark.parametrize("text", ["1", "t", "T", "TRUE", "true", "True"])
def test_true_spellings(text: str) -> None:
    assert go_bool(text) is True


@pytest.mark.parametrize("text", ["0", "f", "F", "FALSE", "false", "False"])
def test_false_spellings(text: str) -> None:
    assert go_bool(text) is False


@pytest.mark.parametrize(
    "text", ["", "yes", "no", "y", "n", "tRUE", "fAlse", " true", "true ", "2", "on"]
)
def test_go_refuses_everything_else(text: str) -> None:
    assert go_bool(text) is None


@given(st.text(max_size=6))
def test_exactly_the_twelve_words(text: str) -> None:
    expected = True if text in GO_TRUE else False if text in GO_FALSE else None
    assert go_bool(text) is expected
    assert len(GO_TRUE) == len(GO_FALSE) == 6 and not GO_TRUE & GO_FALSE
