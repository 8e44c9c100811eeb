"""``frozen_builder``'s function builds the instance the class's own constructor builds, for
the WorkloadEndpoint processor's value and any arguments, positional or keyword; and it
refuses a class whose ``__init__`` does more than set the fields."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calico.model import values as v1
from calico.model.values.builder import frozen_builder

CLASSES = [v1.WorkloadEndpoint, v1.EndpointPort, v1.IPNAT]
_VALUE = (
    st.none()
    | st.text(max_size=3)
    | st.integers()
    | st.tuples(st.text(max_size=2))
    | st.dictionaries(st.text(max_size=2), st.text(max_size=2), max_size=2)
)


def _cases() -> st.SearchStrategy[tuple[type, list[Any]]]:
    return st.sampled_from(CLASSES).flatmap(
        lambda cls: st.tuples(
            st.just(cls),
            st.lists(
                _VALUE, min_size=len(dataclasses.fields(cls)), max_size=len(dataclasses.fields(cls))
            ),
        )
    )


@settings(max_examples=300)
@given(_cases(), st.booleans())
def test_builder_equals_the_constructor(case: tuple[type, list[Any]], keywords: bool) -> None:
    cls, args = case
    names = [f.name for f in dataclasses.fields(cls)]
    build = frozen_builder(cls)
    got = build(**dict(zip(names, args, strict=True))) if keywords else build(*args)
    want = cls(*args)
    assert type(got) is cls and got == want and repr(got) == repr(want)
    assert all(getattr(got, n) is getattr(want, n) for n in names)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(got, names[0], "x")


def test_every_parameter_is_required() -> None:
    build = frozen_builder(v1.IPNAT)
    with pytest.raises(TypeError):
        build("10.0.0.1")


@dataclasses.dataclass(frozen=True, slots=True)
class _Checked:
    a: int

    def __post_init__(self) -> None:
        pass


@dataclasses.dataclass(frozen=True)
class _NoSlots:
    a: int


@dataclasses.dataclass(slots=True)
class _Mutable:
    a: int


@pytest.mark.parametrize("cls", [_Checked, _NoSlots, _Mutable])
def test_refuses_other_classes(cls: Any) -> None:
    with pytest.raises(TypeError):
        frozen_builder(cls)
