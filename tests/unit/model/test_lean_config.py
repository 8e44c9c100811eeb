"""The lean ClusterInformation read against the processor (calico.model.processors.leanconfig):
over generated documents a lean answer is given only where the processor accepts the document
and equals its output; everything else is declined. Felix's start-up config load and its
syncer take the lean path for the plain document and keep the processor's warnings."""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from startup_load import load_counting

from calico.model import ResourceKey
from calico.model import processors as p
from calico.model.processors.leanconfig import lean_cluster_information

ABSENT = object()
KEY = ResourceKey("ClusterInformation", "default")


def one_of(*values: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from(values)


def plain() -> dict[str, Any]:
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": "ClusterInformation",
        "metadata": {
            "creationTimestamp": "2026-12-02T07:27:37Z",
            "name": "default",
            "uid": "3d9796ce-e6d8-41cf-bf2f-3df2b559bdff",
        },
        "spec": {
            "calicoVersion": "3.31.0.dev0",
            "clusterGUID": "f5cc31a21b6a4b82ac56555a2b5d85b5",
            "datastoreReady": True,
        },
    }


_TEXT = one_of("x", "", None, 5, True, ["a"])
_FIELDS = [
    ("spec", "calicoVersion", _TEXT),
    ("spec", "clusterGUID", _TEXT),
    ("spec", "clusterType", _TEXT),
    ("spec", "variant", _TEXT),
    ("spec", "datastoreReady", one_of(True, False, None, "true", 1, 0)),
    ("spec", "bogus", one_of(1)),
    ("metadata", "name", one_of("default", "other", "", None, 1)),
    ("metadata", "namespace", one_of("ns1", "", None)),
    ("metadata", "labels", one_of({"a": "b"}, {"-bad": "x"}, {"a": 1}, None)),
    ("metadata", "annotations", one_of({"a": "b"}, {"bad key!": "x"}, None)),
    ("metadata", "uid", one_of("u", 7, None)),
    ("metadata", "finalizers", one_of(["x"])),
    ("", "apiVersion", one_of("projectcalico.org/v3", "projectcalico.org/v1", None)),
    ("", "kind", one_of("ClusterInformation", "Tier", "", None)),
    ("", "status", one_of({})),
]


@st.composite
def documents(draw: st.DrawFn) -> tuple[ResourceKey, Any]:
    doc = plain()
    for section, name, values in draw(st.lists(st.sampled_from(_FIELDS), max_size=3, unique=True)):
        target = doc[section] if section else doc
        value = draw(st.one_of(values, st.just(ABSENT)))
        if value is ABSENT:
            target.pop(name, None)
        else:
            target[name] = value
    if draw(st.integers(0, 9)) == 0:
        doc[draw(one_of("metadata", "spec"))] = draw(one_of(None, [], "x", {}))
    key = ResourceKey("ClusterInformation", draw(one_of("default", "default", "other")))
    return key, json.loads(json.dumps(doc))


def answer(key: ResourceKey, doc: Any) -> tuple[str, Any]:
    try:
        return "ok", dict(p.cluster_information(key, copy.deepcopy(doc)))
    except ValueError as exc:
        return "error", str(exc)


@settings(max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
@example((KEY, plain()))
def test_lean_cluster_information_equals_the_processor(case: tuple[ResourceKey, Any]) -> None:
    key, doc = case
    expected = answer(key, doc)
    before = copy.deepcopy(doc)
    got = lean_cluster_information(key, doc)
    assert doc == before
    if got is not None:
        assert expected[0] == "ok"
        assert got == expected[1]
        assert [repr(v) for v in got.values()] == [repr(v) for v in expected[1].values()]


def _load(doc: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[str]]:
    return load_counting(KEY, doc, "cluster_information", monkeypatch)


def test_startup_config_reads_a_plain_cluster_information_lean(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loaded, calls = _load(plain(), monkeypatch)
    assert calls == [] and loaded.ready
    assert loaded.global_config["CalicoVersion"] == "3.31.0.dev0"
    doc = plain()
    doc["spec"]["datastoreReady"] = False
    loaded, calls = _load(doc, monkeypatch)
    assert calls == [] and not loaded.ready


def test_startup_config_keeps_the_processor_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    doc = plain()
    doc["spec"]["bogus"] = 1  # extra fields are refused
    with caplog.at_level(logging.WARNING, logger="calico.felix.startup_config"):
        loaded, calls = _load(doc, monkeypatch)
    assert calls == ["default"] and loaded.ready
    kind, message = answer(KEY, doc)
    assert kind == "error"
    assert [r.getMessage() for r in caplog.records] == [
        f"Ignoring unparseable config resource {KEY.default_path()}: {message}"
    ]
