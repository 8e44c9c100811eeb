"""The one-pass lean WorkloadEndpoint read (calico.model.processors.lean_v1) against the
two-step reference (the lean view, then its v1 build): over generated documents and names,
valid and not, the same answer (None, the v1 output field by field, or the same error), the
first time and again from the memos; and the syncer's conversion gives the same output and
the same warnings with either. ``wep_key_fast`` equals ``wep_key_from_v3``."""

from __future__ import annotations

import copy
import json
import logging
import queue
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from calico.model import ResourceKey
from calico.model.names import wep_key_fast, wep_key_from_v3
from calico.model.processors import endpoints, lean_v1
from calico.syncer.watchersyncer import ResourceType, _WatcherCache
from tests.unit.model.test_lean_wep import documents, plain

_NAMES = st.sampled_from(
    ["host1-k8s-pod1-eth0", "host1-k8s-pod1-eth0", "host--1-k8s-pod--a-eth0", "h-k-p",
     "h-k-p-e-x", "-h-k-p-e", "h--k-p-e", "h-k--p-e", "h-k-p-", "h-k-p-e/x", "a/b-k8s-p-e",
     "host2-cni-pod7-net1", "h---k-p-e"]
)  # fmt: skip
_NAMESPACES = st.sampled_from(["ns1", "ns1", "ns2", "a/b"])


def answer(process: Any, key: ResourceKey, doc: Any) -> tuple[Any, ...]:
    try:
        out = process(key, copy.deepcopy(doc))
    except ValueError as exc:
        return "error", type(exc).__name__, str(exc)
    if out is None:
        return ("declined",)
    return "ok", [(repr(k), hash(k), repr(v)) for k, v in out.items()]  # types included


def _rename(key: ResourceKey, name: str, namespace: str) -> ResourceKey:
    if "/" in name or "/" in namespace:  # not a ResourceKey's: only the key functions see it
        return key
    return ResourceKey("WorkloadEndpoint", name, namespace)


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(case=documents(), name=_NAMES, namespace=_NAMESPACES, clear=st.booleans())
@example(case=(ResourceKey("WorkloadEndpoint", "host1-k8s-pod1-eth0", "ns1"), plain()),
         name="host1-k8s-pod1-eth0", namespace="ns1", clear=True)  # fmt: skip
def test_one_pass_answers_as_the_two_steps(
    case: tuple[ResourceKey, Any], name: str, namespace: str, clear: bool
) -> None:
    key, doc = case
    key = _rename(key, name, namespace)
    if clear:
        lean_v1._labels_memo.clear()
        lean_v1._ports_memo.clear()
    expected = answer(endpoints.workload_endpoint_lean_reference, key, doc)
    assert answer(lean_v1.lean_wep_output, key, doc) == expected
    assert answer(lean_v1.lean_wep_output, key, doc) == expected  # from the memos


def test_one_pass_never_changes_the_document() -> None:
    doc = plain()
    before = copy.deepcopy(doc)
    assert lean_v1.lean_wep_output(ResourceKey("WorkloadEndpoint", "h-k-p-e", "ns1"), doc)
    assert doc == before


def test_labels_are_a_fresh_dict_each_time() -> None:
    key = ResourceKey("WorkloadEndpoint", "host1-k8s-pod1-eth0", "ns1")
    (a,) = lean_v1.lean_wep_output(key, plain()).values()
    (b,) = lean_v1.lean_wep_output(key, plain()).values()
    assert a.labels == b.labels and a.labels is not b.labels


@pytest.mark.parametrize("bad", [["x"], {"k": "v"}, 1.5, None, True])
def test_unhashable_or_odd_label_values_decline(bad: Any) -> None:
    doc = plain()
    doc["metadata"]["labels"]["app"] = bad
    key = ResourceKey("WorkloadEndpoint", "host1-k8s-pod1-eth0", "ns1")
    assert lean_v1.lean_wep_output(key, doc) is None
    assert endpoints.workload_endpoint_lean_reference(key, doc) is None


@given(name=_NAMES, namespace=st.sampled_from(["ns1", "", "a/b", "x-y"]))
def test_fast_key_equals_the_reference(name: str, namespace: str) -> None:
    def build(fn: Any) -> tuple[Any, ...]:
        try:
            got = fn(namespace, name)
        except ValueError as exc:
            return "error", type(exc).__name__, str(exc)
        return "ok", repr(got), hash(got), got

    fast, ref = build(wep_key_fast), build(wep_key_from_v3)
    assert fast == ref


def _convert(rtype: ResourceType, key: ResourceKey, text: str, caplog: Any) -> tuple[Any, Any]:
    cache = _WatcherCache(0, rtype, None, queue.Queue(), threading.Event())  # type: ignore[arg-type]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="calico.syncer.watchersyncer"):
        out = cache._convert(key, text)
    return repr(out), [r.getMessage() for r in caplog.records]


def _reference_processor(key: ResourceKey, value: Any) -> Any:
    out = endpoints.workload_endpoint_lean_reference(key, value)
    if out is not None:
        return out
    return endpoints.workload_endpoint_v1(key, endpoints.decode_wep(key, value))


FUSED = ResourceType("WorkloadEndpoint", endpoints.workload_endpoint, lean_v1.lean_wep_output)
REFERENCE = ResourceType(
    "WorkloadEndpoint", _reference_processor, endpoints.workload_endpoint_lean_reference
)


@settings(
    max_examples=600,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=documents(), name=_NAMES)
def test_conversion_output_and_warnings_match(case: Any, name: str, caplog: Any) -> None:
    key, doc = case
    key = _rename(key, name, key.namespace)
    text = json.dumps(doc)
    assert _convert(FUSED, key, text, caplog) == _convert(REFERENCE, key, text, caplog)


def test_memos_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lean_v1, "_MEMO_MAX", 3)
    monkeypatch.setattr(lean_v1, "_labels_memo", {})
    monkeypatch.setattr(lean_v1, "_ports_memo", {})
    key = ResourceKey("WorkloadEndpoint", "host1-k8s-pod1-eth0", "ns1")
    for i in range(1, 10):
        doc = plain()
        doc["metadata"]["labels"]["app"] = f"a{i}"
        doc["spec"]["ports"][0]["port"] = i
        (value,) = lean_v1.lean_wep_output(key, doc).values()
        assert value.labels["app"] == f"a{i}" and value.ports[0].port == i
        assert len(lean_v1._labels_memo) <= 3 and len(lean_v1._ports_memo) <= 3
