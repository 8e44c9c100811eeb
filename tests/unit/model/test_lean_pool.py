"""The lean IPPool read against the processor (calico.model.processors.leanpool): over
generated documents a lean answer is given only where the processor accepts the document and
equals its output field by field; everything else is declined. Felix's syncer and start-up
encapsulation check take the lean path for the plain pool."""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from calico.datastore.backend import KVPair, ListResult
from calico.felix.startup_config import load_encapsulation
from calico.model import ResourceKey
from calico.model import processors as p
from calico.model.processors.leanpool import lean_ip_pool
from calico.syncer.definitions import felix_resource_types
from calico.syncer.watchersyncer import _WatcherCache

ABSENT = object()
KEY = ResourceKey("IPPool", "p")


def one_of(*values: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from(values)


def plain() -> dict[str, Any]:
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": "IPPool",
        "metadata": {"creationTimestamp": "2026-12-02T07:27:37Z", "name": "p", "uid": "d98c"},
        "spec": {
            "allowedUses": ["Workload", "Tunnel"],
            "assignmentMode": "Automatic",
            "blockSize": 26,
            "cidr": "10.65.0.0/16",
            "ipipMode": "Never",
            "nodeSelector": "all()",
            "vxlanMode": "Never",
        },
    }


_ENCAP = one_of("Never", "Always", "CrossSubnet", "never", "", None, 1)
_BOOL = one_of(True, False, None, "true", 1, 0)
_FIELDS = [
    ("spec", "cidr", one_of(
        "10.65.0.0/16", "10.65.0.1/16", "10.65.0.0/27", "10.65.0.1", "fd00::/108", "fd00::/64",
        "169.254.0.0/16", "fe80::/64", "bad", "", None, 5,
    )),
    ("spec", "ipipMode", _ENCAP),
    ("spec", "vxlanMode", _ENCAP),
    ("spec", "natOutgoing", _BOOL),
    ("spec", "disabled", _BOOL),
    ("spec", "disableBGPExport", _BOOL),
    ("spec", "blockSize", one_of(26, 0, 20, 19, 32, 33, 122, 116, 128, True, "26", 26.0, None)),
    ("spec", "nodeSelector", one_of("all()", "has(x)", "", "a ==", None, 1)),
    ("spec", "allowedUses", one_of(
        ["Workload"], [], ["Tunnel", "Tunnel"], ["LoadBalancer"], ["Workload", "LoadBalancer"],
        ["x"], None, "Workload", [1],
    )),
    ("spec", "assignmentMode", one_of("Automatic", "Manual", "auto", None, [])),
    ("spec", "namespaceSelector", one_of("all()")),
    ("spec", "ipip", one_of({"enabled": True})),
    ("spec", "nat-outgoing", one_of(True)),
    ("spec", "bogus", one_of(1)),
    ("metadata", "name", one_of("p", "P", "", None, "a.b", "-x")),
    ("metadata", "namespace", one_of("ns1", "", None)),
    ("metadata", "labels", one_of({"a": "b"}, {"-bad": "x"}, {"a": 1}, None)),
    ("", "apiVersion", one_of("projectcalico.org/v3", "v1", None)),
    ("", "kind", one_of("IPPool", "Tier", None)),
    ("", "status", one_of({})),
]  # fmt: skip


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
    return KEY, json.loads(json.dumps(doc))


def answer(key: ResourceKey, doc: Any) -> tuple[str, Any]:
    try:
        return "ok", dict(p.ip_pool(key, copy.deepcopy(doc)))
    except ValueError as exc:
        return "error", str(exc)


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
@example((KEY, plain()))
def test_lean_ip_pool_equals_the_processor(case: tuple[ResourceKey, Any]) -> None:
    key, doc = case
    expected = answer(key, doc)
    before = copy.deepcopy(doc)
    got = lean_ip_pool(key, doc)
    assert doc == before
    if got is not None:
        assert expected[0] == "ok", expected
        assert got == expected[1]
        assert [repr(v) for v in got.values()] == [repr(v) for v in expected[1].values()]


def test_plain_pools_take_the_lean_path() -> None:
    assert lean_ip_pool(KEY, plain()) == dict(p.ip_pool(KEY, plain()))
    bare = {"metadata": {"name": "p"}, "spec": {"cidr": "10.65.0.0/16", "natOutgoing": True}}
    assert lean_ip_pool(KEY, bare) == dict(p.ip_pool(KEY, bare))
    (rtype,) = [t for t in felix_resource_types() if t.kind == "IPPool"]
    assert rtype.lean is lean_ip_pool
    cache = _WatcherCache(0, rtype, None, None, threading.Event())  # type: ignore[arg-type]
    assert cache._convert(KEY, json.dumps(plain())) == dict(p.ip_pool(KEY, plain()))


class _Backend:
    def __init__(self, docs: dict[str, str]) -> None:
        self.docs = docs

    def list(self, prefix: str) -> ListResult:
        return ListResult([KVPair(k, v, 1) for k, v in self.docs.items()], 1)


@pytest.mark.parametrize("mode", ["Never", "Always", "CrossSubnet"])
def test_startup_encapsulation_reads_pools_lean(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = p.ip_pool

    def counting(key: ResourceKey, value: Any) -> Any:
        calls.append(key.name)
        return real(key, value)

    monkeypatch.setattr(p, "ip_pool", counting)
    doc = plain()
    doc["spec"]["vxlanMode"] = mode
    encap = load_encapsulation(_Backend({KEY.default_path(): json.dumps(doc)}))  # type: ignore[arg-type]
    assert calls == []
    assert encap.vxlan_enabled == (mode != "Never")
