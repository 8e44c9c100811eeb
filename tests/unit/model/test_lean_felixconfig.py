"""The lean FelixConfiguration read against the processor
(calico.model.processors.leanfelixconfig): over generated documents a lean answer is given
only where the processor accepts the document, and equals its output key for key, in order;
everything else is declined. Felix's start-up config load and its syncer take the lean path
for calico-node's ``default`` and keep the processor's warnings for a bad one."""

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
from calico.model.processors.leanfelixconfig import _FIELDS, lean_felix_configuration
from calico.syncer.definitions import felix_resource_types

ABSENT = object()
KEY = ResourceKey("FelixConfiguration", "default")


def one_of(*values: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from(values)


def plain(name: str = "default") -> dict[str, Any]:
    """What calico-node writes at its first start."""
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": "FelixConfiguration",
        "metadata": {"name": name, "uid": "u1", "creationTimestamp": "2026-12-02T07:27:37Z"},
        "spec": {
            "bpfLogLevel": "",
            "floatingIPs": "Disabled",
            "logSeverityScreen": "Info",
            "reportingInterval": "0s",
            "healthPort": 9099,
        },
    }


_BOOL = one_of(True, False, None, "true", 1, 0)
_INT = one_of(0, 1, 9099, 65535, 65536, -1, 16777215, 16777216, 1.0, 1.5, "1", True, None)
_DURATION = one_of("0s", "90s", "125s", "1m30s", "1.5s", "500ms", "1h", "", "5", "x", 5, None)
_TEXT = one_of(
    "", "Info", "info", "DEBUG", "Warning", "Fatal", "Trace", "bogus", "Off", "off", "Drop",
    "accept", "RETURN", "Insert", "append", "Auto", "legacy", "NFT", "TCP", "tcp", "Enabled",
    "Disabled", "enabled", "cali", "/var/log/felix.log", "0.0.0.0", 7, None, ["Info"],
)  # fmt: skip


def _values(rule: Any) -> st.SearchStrategy[Any]:
    if rule == "bool":
        return _BOOL
    if isinstance(rule, tuple) and rule[0] == "int":
        return _INT
    if rule == "duration":
        return _DURATION
    return _TEXT


_SPEC_FIELDS = [("spec", name, _values(rule)) for name, rule in _FIELDS.items()]
_OTHER = [
    ("spec", "nodeSelector", one_of("all()", "a == 'b'", "")),
    ("spec", "iptablesLockProbeInterval", one_of("50ms", "1s")),
    ("spec", "failsafeInboundHostPorts", one_of([], [{"protocol": "TCP", "port": 22}])),
    ("spec", "bogus", one_of(1)),
    ("metadata", "name", one_of("default", "node.h1", "other", "", None, 1)),
    ("metadata", "namespace", one_of("ns1", "", None)),
    ("metadata", "labels", one_of({"a": "b"}, {"-bad": "x"}, {"a": 1}, None)),
    (
        "metadata",
        "annotations",
        one_of(
            {"config.projectcalico.org/LogSeverityScreen": "Debug"},
            {"config.projectcalico.org/": "x"},
            {"config.projectcalico.org/Free": "anything"},
            {"other.io/x": "y"},
            {"bad key!": "x"},
            None,
        ),
    ),
    ("metadata", "uid", one_of("u", 7, None)),
    ("metadata", "finalizers", one_of(["x"])),
    ("", "apiVersion", one_of("projectcalico.org/v3", "projectcalico.org/v1", None)),
    ("", "kind", one_of("FelixConfiguration", "Tier", "", None)),
    ("", "status", one_of({})),
]


@st.composite
def documents(draw: st.DrawFn) -> tuple[ResourceKey, Any]:
    name = draw(one_of("default", "default", "node.h1", "node.", "node.Bad_Host", "scoped"))
    doc = plain(name)
    if draw(st.booleans()):
        doc["spec"] = {}
    fields = _SPEC_FIELDS + _OTHER
    for section, field, values in draw(st.lists(st.sampled_from(fields), max_size=6, unique=True)):
        target = doc[section] if section else doc
        value = draw(st.one_of(values, st.just(ABSENT)))
        if value is ABSENT:
            target.pop(field, None)
        else:
            target[field] = value
    if draw(st.integers(0, 19)) == 0:
        doc[draw(one_of("metadata", "spec"))] = draw(one_of(None, [], "x", {}))
    return ResourceKey("FelixConfiguration", name), json.loads(json.dumps(doc))


def answer(key: ResourceKey, doc: Any) -> tuple[str, Any]:
    try:
        return "ok", dict(p.felix_configuration(key, copy.deepcopy(doc)))
    except ValueError as exc:
        return "error", str(exc)


def check(key: ResourceKey, doc: Any) -> bool:
    """The lean answer (if any) is the processor's, item for item and in order."""
    expected = answer(key, doc)
    before = copy.deepcopy(doc)
    got = lean_felix_configuration(key, doc)
    assert doc == before
    if got is None:
        return False
    assert expected[0] == "ok", expected
    assert list(got.items()) == list(expected[1].items())
    assert all(type(v) is str for v in got.values())
    return True


@settings(max_examples=2000, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
@example((KEY, plain()))
@example((ResourceKey("FelixConfiguration", "node.h1"), plain("node.h1")))
def test_lean_felix_configuration_equals_the_processor(case: tuple[ResourceKey, Any]) -> None:
    check(*case)


def test_every_lean_field_renders_as_the_processor() -> None:
    """One document with every field the lean read takes, set to a valid non-default value."""
    values = {"bool": True, "duration": "1m30s", "str": "x", "log": "Debug"}
    spec: dict[str, Any] = {}
    for name, rule in _FIELDS.items():
        if isinstance(rule, tuple):
            spec[name] = rule[2] if rule[0] == "int" else rule[1]
        else:
            spec[name] = values[rule]
    doc = {"kind": "FelixConfiguration", "metadata": {"name": "default"}, "spec": spec}
    assert check(KEY, doc)
    assert len(lean_felix_configuration(KEY, doc) or {}) == len(_FIELDS)


def test_plain_shapes_take_the_lean_path() -> None:
    assert check(KEY, plain())
    assert check(ResourceKey("FelixConfiguration", "node.h1"), plain("node.h1"))
    doc = plain()
    doc["metadata"]["annotations"] = {"config.projectcalico.org/LogSeverityScreen": "Debug"}
    assert check(KEY, doc)


def test_declines_what_the_model_must_decide() -> None:
    scoped = plain("scoped")
    scoped["spec"]["nodeSelector"] = "all()"
    assert lean_felix_configuration(ResourceKey("FelixConfiguration", "scoped"), scoped) is None
    for field, value in (("healthPort", 1.0), ("logSeverityScreen", None), ("bogus", 1)):
        doc = plain()
        doc["spec"][field] = value
        assert lean_felix_configuration(KEY, doc) is None
    doc = plain()
    doc["spec"]["healthPort"] = 70000  # invalid: declined, the processor reports it
    assert lean_felix_configuration(KEY, doc) is None
    assert answer(KEY, doc)[0] == "error"


def test_felix_syncer_type_uses_the_lean_read() -> None:
    (rtype,) = [t for t in felix_resource_types() if t.kind == "FelixConfiguration"]
    assert rtype.lean is lean_felix_configuration
    assert rtype.processor is p.felix_configuration


def _load(doc: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[str]]:
    return load_counting(KEY, doc, "felix_configuration", monkeypatch)


def test_startup_config_reads_calico_nodes_default_lean(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded, calls = _load(plain(), monkeypatch)
    assert calls == []
    assert loaded.global_config == {
        "FloatingIPs": "Disabled",
        "HealthPort": "9099",
        "LogSeverityScreen": "Info",
        "ReportingIntervalSecs": "0",
    }


def test_startup_config_keeps_the_processor_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    doc = plain()
    doc["spec"]["logSeverityScreen"] = "Loud"  # invalid: declined, the processor's error
    with caplog.at_level(logging.WARNING, logger="calico.felix.startup_config"):
        loaded, calls = _load(doc, monkeypatch)
    assert calls == ["default"] and loaded.global_config == {}
    kind, message = answer(KEY, doc)
    assert kind == "error"
    assert [r.getMessage() for r in caplog.records] == [
        f"Ignoring unparseable config resource {KEY.default_path()}: {message}"
    ]
