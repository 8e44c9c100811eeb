"""Pure helpers: JSON/merge patch, Go tabwriter layout, Go value formatting."""

from __future__ import annotations

import pytest

from calico.calicoctl.patching import PatchError, json_patch, merge_patch
from calico.calicoctl.printer import tabwrite
from calico.calicoctl.resources import go_float, join


def test_merge_patch_rfc7386_examples() -> None:
    assert merge_patch({"a": "b"}, {"a": "c"}) == {"a": "c"}
    assert merge_patch({"a": "b"}, {"b": "c"}) == {"a": "b", "b": "c"}
    assert merge_patch({"a": "b"}, {"a": None}) == {}
    assert merge_patch({"a": ["b"]}, {"a": "c"}) == {"a": "c"}
    assert merge_patch({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}) == {"a": {"b": "d"}}
    assert merge_patch({"e": None}, {"a": 1}) == {"e": None, "a": 1}
    assert merge_patch([1, 2], {"a": "b", "c": None}) == {"a": "b"}


def test_json_patch_operations() -> None:
    doc = {"foo": ["bar", "baz"], "x": {"y": 1}}
    ops = [
        {"op": "add", "path": "/foo/1", "value": "qux"},
        {"op": "add", "path": "/foo/-", "value": "end"},
        {"op": "remove", "path": "/foo/0"},
        {"op": "replace", "path": "/x/y", "value": 2},
        {"op": "copy", "from": "/x", "path": "/z"},
        {"op": "move", "from": "/z/y", "path": "/w"},
        {"op": "test", "path": "/w", "value": 2},
        {"op": "add", "path": "/a~1b", "value": True},
    ]
    assert json_patch(doc, ops) == {
        "foo": ["qux", "baz", "end"],
        "x": {"y": 2},
        "z": {},
        "w": 2,
        "a/b": True,
    }
    assert doc == {"foo": ["bar", "baz"], "x": {"y": 1}}  # input untouched


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/a", "value": 2}],
        [{"op": "remove", "path": "/missing"}],
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "add", "path": "/l/5", "value": 1}],
        [{"op": "add", "path": "/l/01", "value": 1}],
        [{"op": "move", "from": "/a", "path": "/a/b"}],
        [{"op": "frobnicate", "path": "/a"}],
        {"op": "add"},
    ],
)
def test_json_patch_errors(ops: object) -> None:
    with pytest.raises(PatchError):
        json_patch({"a": 1, "l": [0]}, ops)


def test_tabwriter_layout() -> None:
    assert tabwrite([["NAME", "CIDR"], ["p", "10.0.0.0/8"]]) == (
        "NAME   CIDR         \np      10.0.0.0/8   \n"
    )
    assert tabwrite([["A"], [""]]) == "A    \n     \n"  # minimum width 5


def test_go_formatting() -> None:
    assert [go_float(v) for v in (100.0, 1e6, 0.5, 1234567.0, -3.0)] == [
        "100",
        "1e+06",
        "0.5",
        "1.234567e+06",
        "-3",
    ]
    assert join({"b": "2", "a": "1"}) == "a=1,b=2"
    assert join(["x" * 50, "y" * 50], ",", 80) == ("x" * 50 + "," + "y" * 26 + "...")
