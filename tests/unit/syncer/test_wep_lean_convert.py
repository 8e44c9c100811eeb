"""The syncer's WorkloadEndpoint conversion with the lean processor on orjson's decode
(``ResourceType.lean``) answers exactly as without it: the same v1 output for every stored
text, or nothing and the same warning. Texts: the lean test's generated documents, dumped,
with integers out of orjson's range, floats, NaN and junk spliced in."""

from __future__ import annotations

import json
import logging
import queue
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calico.model import ResourceKey
from calico.model import processors as p
from calico.syncer.definitions import felix_resource_types
from calico.syncer.watchersyncer import ResourceType, _WatcherCache
from tests.unit.model.test_lean_wep import documents, plain

KEY = ResourceKey("WorkloadEndpoint", "host1-k8s-pod1-eth0", "ns1")


def convert(rtype: ResourceType, key: ResourceKey, text: str, caplog: Any) -> tuple[Any, Any]:
    cache = _WatcherCache(0, rtype, None, queue.Queue(), threading.Event())  # type: ignore[arg-type]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="calico.syncer.watchersyncer"):
        out = cache._convert(key, text)
    return out, [r.getMessage() for r in caplog.records]


WITH = ResourceType("WorkloadEndpoint", p.workload_endpoint, p.workload_endpoint_lean)
WITHOUT = ResourceType("WorkloadEndpoint", p.workload_endpoint)

_SPLICES = st.sampled_from(
    ["18446744073709551616", "-9223372036854775809", "2" * 30, "8080.0", "1e400", "NaN",
     '"\\ud800"', "null", "true", "[]", "{}", '"x"']
)  # fmt: skip


def test_felix_uses_the_lean_processor() -> None:
    (wep,) = [t for t in felix_resource_types() if t.kind == "WorkloadEndpoint"]
    assert wep.lean is p.workload_endpoint_lean


@settings(
    max_examples=800,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=documents(), sort=st.booleans(), compact=st.booleans())
def test_lean_conversion_answers_as_the_plain_one(
    case: Any, sort: bool, compact: bool, caplog: Any
) -> None:
    key, doc = case
    text = json.dumps(doc, sort_keys=sort, separators=(",", ":") if compact else None)
    assert convert(WITH, key, text, caplog) == convert(WITHOUT, key, text, caplog)


@settings(
    max_examples=800,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    field=st.sampled_from(
        ["port", "protocol", "name", "interfaceName", "ipNetworks", "profiles", "mac", "node"]
    ),
    splice=_SPLICES,
    in_port=st.booleans(),
)
def test_spliced_values_answer_as_the_plain_one(
    field: str, splice: str, in_port: bool, caplog: Any
) -> None:
    doc = plain()
    target = doc["spec"]["ports"][0] if in_port else doc["spec"]
    target[field] = "@@"
    text = json.dumps(doc).replace('"@@"', splice)
    assert convert(WITH, KEY, text, caplog) == convert(WITHOUT, KEY, text, caplog)


@pytest.mark.parametrize("text", ["", "{", "null", "[1]", '{"spec": 1e400}', "\ufeff{}"])
def test_bad_texts_answer_as_the_plain_one(text: str, caplog: Any) -> None:
    assert convert(WITH, KEY, text, caplog) == convert(WITHOUT, KEY, text, caplog)


def test_plain_endpoint_takes_the_lean_path(monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    def refuse(text: str) -> Any:
        raise AssertionError("the stdlib decoder was used")

    monkeypatch.setattr("calico.syncer.jsondecode.loads", refuse)
    out, logs = convert(WITH, KEY, json.dumps(plain()), caplog)
    assert out and not logs
