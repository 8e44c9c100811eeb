"""The lean WorkloadEndpoint read against the model (calico.model.processors.lean): over
generated documents, valid and not, the processor's answer (v1 output or error message) is
the one the model path gives, and a lean answer is only ever given for a document the model
accepts. Plain documents (the CNI plugin's and the scale bench's shape) take the lean path."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from calico.model import ResourceKey
from calico.model import processors as p
from calico.model.processors import endpoints
from calico.model.processors.lean import lean_workload_endpoint

ABSENT = object()


def plain() -> dict[str, Any]:
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": "WorkloadEndpoint",
        "metadata": {
            "name": "host1-k8s-pod1-eth0",
            "namespace": "ns1",
            "uid": "5b6e3c1a-8f0e-4c4e-9a6d-1f2e3d4c5b6a",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web", "projectcalico.org/namespace": "ns1"},
        },
        "spec": {
            "orchestrator": "k8s",
            "node": "host1",
            "pod": "pod1",
            "workload": "pod1",
            "endpoint": "eth0",
            "interfaceName": "cali0123456789a",
            "ipNetworks": ["10.65.0.2/32"],
            "profiles": ["kns.ns1", "ksa.ns1.default"],
            "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
        },
    }


def one_of(*values: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from(values)


_PORT_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "name": one_of("http", "dns-tcp", "", "Http", "a--b", "8080", None, 5, "x" * 16),
    "protocol": one_of("TCP", "UDP", "SCTP", "ICMP", "tcp", "6", 17, 1, 256, True, None, 6.0),
    "port": one_of(80, 1, 65535, 0, 65536, -1, "80", 80.0, True, None),
    "hostPort": one_of(8080, None, 0),
    "hostIP": one_of("10.0.0.1", "bad"),
}


@st.composite
def _port(draw: st.DrawFn) -> dict[str, Any]:
    """The plain port with one or two fields changed, added or left out."""
    port: dict[str, Any] = {"name": "http", "protocol": "TCP", "port": 8080}
    for name in draw(st.lists(st.sampled_from(sorted(_PORT_FIELDS)), max_size=2, unique=True)):
        value = draw(st.one_of(_PORT_FIELDS[name], st.just(ABSENT)))
        if value is ABSENT:
            port.pop(name, None)
        else:
            port[name] = value
    return port


@st.composite
def _labels(draw: st.DrawFn) -> dict[str, Any]:
    """The plain labels with one entry added or replaced (keys and values valid or not)."""
    labels: dict[str, Any] = {"app": "web", "projectcalico.org/namespace": "ns1"}
    key = draw(one_of("app", "role", "-bad", "x/y", "a" * 64, "example.com/tier", "pcns.team"))
    labels[key] = draw(one_of("web", "", "bad value", "v" * 64, 1, None, "a.b-c_d", "-x"))
    return labels


# Each field: valid values, invalid values, other JSON types, null, or left out.
_META_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "name": one_of("host1-k8s-pod1-eth0", "Bad_Name", "", None, 5, "a" * 254, "-x"),
    "namespace": one_of("ns1", "ns2", "NS", "", None, "a" * 64, "a.b", 3),
    "labels": st.one_of(_labels(), one_of(None, ["app"], "app=web")),
    "annotations": one_of({"a": "b"}, {"bad key!": "x"}, {"a": "x" * 262144}, {"a": 1}, None),
    "generateName": one_of("pod-", "", None, 3),
    "uid": one_of("5b6e3c1a", 7, None),
    "creationTimestamp": one_of("2026-01-01T00:00:00Z", 1, None),
    "resourceVersion": one_of("12", 12),
    "finalizers": one_of(["x"]),
    "ownerReferences": one_of([{"kind": "Pod"}]),
    "bogus": one_of(1),
}
_SPEC_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "orchestrator": one_of("k8s", "libvirt", "Bad", "", None, 1),
    "node": one_of("host1", "host-1.example", "Host1", "", None),
    "pod": one_of("pod1", "pod_1", "", None),
    "workload": one_of("pod1", "", "UP"),
    "endpoint": one_of("eth0", "eth_0", ""),
    "serviceAccountName": one_of("default", "", "Not OK", None),
    "containerID": one_of("abc123", "-abc", "", None, 5),
    "interfaceName": one_of("cali0123456789a", "cali01234567890a", "", None, "bad/name", 1),
    "mac": one_of("ee:ee:ee:ee:ee:ee", "EE-EE-EE-EE-EE-EE", "zz", "", None, 1),
    "ipNetworks": st.one_of(
        st.lists(
            one_of(
                "10.65.0.2/32",
                "10.65.0.3",
                "10.65.0.0/24",
                "fd00::2/128",
                "010.1.1.1/32",
                "10.65.0.2/032",
                "300.1.1.1/32",
                "",
                1,
            ),
            max_size=3,
        ),
        one_of(None, "10.65.0.2/32"),
    ),
    "profiles": st.one_of(
        st.lists(one_of("kns.ns1", "Bad", "", 1), max_size=2), one_of(None, "kns.ns1")
    ),
    "ports": st.one_of(st.lists(_port(), max_size=2), one_of(None, {"name": "http"})),
    "ipNATs": one_of([{"internalIP": "10.65.0.2", "externalIP": "1.2.3.4"}], None, []),
    "ipv4Gateway": one_of("10.65.0.1", None),
    "ipv6Gateway": one_of("fd00::1"),
    "allowSpoofedSourcePrefixes": one_of(["10.0.0.0/8"], None),
    "qosControls": one_of({"ingressBandwidth": 1000000}, None),
    "bogus": one_of(1),
}
_TOP_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "apiVersion": one_of("projectcalico.org/v3", "projectcalico.org/v1", None, 3),
    "kind": one_of("WorkloadEndpoint", "NetworkPolicy", "", None),
    "status": one_of({}),
}


_FIELDS = [
    (section, name, values)
    for section, fields in (("metadata", _META_FIELDS), ("spec", _SPEC_FIELDS), ("", _TOP_FIELDS))
    for name, values in sorted(fields.items())
]


@st.composite
def documents(draw: st.DrawFn) -> tuple[ResourceKey, Any]:
    """The plain endpoint with one or two fields changed (so that a single bad field, the
    rest plain, is common), sometimes a whole section replaced, and the key's namespace."""
    doc = plain()
    for section, name, values in draw(st.lists(st.sampled_from(_FIELDS), max_size=2, unique=True)):
        target = doc[section] if section else doc
        value = draw(st.one_of(values, st.just(ABSENT)))
        if value is ABSENT:
            target.pop(name, None)
        else:
            target[name] = value
    if draw(st.integers(0, 3)) == 0 and isinstance(doc["spec"].get("ports"), list):
        doc["spec"]["ports"] = [draw(_port())]  # ports are the richest field: check them often
    for section in draw(st.lists(one_of("metadata", "spec"), max_size=1)):
        if draw(st.integers(0, 9)) == 0:
            doc[section] = draw(one_of(None, [], "x", {}))
    key_ns = draw(one_of("ns1", "ns1", "ns2"))
    key = ResourceKey("WorkloadEndpoint", "host1-k8s-pod1-eth0", key_ns)
    return key, json.loads(json.dumps(doc))


def answer(process: Any, key: ResourceKey, doc: Any) -> tuple[str, Any]:
    try:
        return "ok", dict(process(key, copy.deepcopy(doc)))
    except ValueError as exc:
        return "error", str(exc)


def reference(key: ResourceKey, doc: Any) -> dict[Any, Any]:
    return endpoints.workload_endpoint_v1(key, endpoints.decode_wep(key, doc))


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
@example((ResourceKey("WorkloadEndpoint", "host1-k8s-pod1-eth0", "ns1"), plain()))
def test_processor_answers_as_the_model_does(case: tuple[ResourceKey, Any]) -> None:
    key, doc = case
    expected = answer(reference, key, doc)
    assert answer(p.workload_endpoint, key, doc) == expected
    lean = lean_workload_endpoint(key, copy.deepcopy(doc))
    if lean is not None:
        assert expected[0] == "ok"
        assert dict(endpoints.workload_endpoint_v1(key, lean)) == expected[1]
        fast = endpoints.lean_workload_endpoint_v1(key, lean)
        assert fast == expected[1]
        for got, want in zip(fast.values(), expected[1].values(), strict=True):
            assert repr(got) == repr(want)  # field by field, types included


def test_lean_read_never_changes_the_document() -> None:
    doc = plain()
    before = copy.deepcopy(doc)
    assert lean_workload_endpoint(ResourceKey("WorkloadEndpoint", "x", "ns1"), doc) is not None
    assert doc == before


def _model_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = endpoints.decode_wep

    def counting(key: ResourceKey, value: Any) -> Any:
        calls.append(key.name)
        return real(key, value)

    monkeypatch.setattr(endpoints, "decode_wep", counting)
    return calls


def test_plain_endpoints_skip_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _model_reads(monkeypatch)
    key = ResourceKey("WorkloadEndpoint", "host1-k8s-pod1-eth0", "ns1")
    out = p.workload_endpoint(key, plain())
    (value,) = out.values()
    assert value.ipv4_nets == ("10.65.0.2/32",)
    assert value.labels["projectcalico.org/orchestrator"] == "k8s"
    assert calls == []


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["spec"].update(ipNetworks=["fd00::2/128"]),
        lambda d: d["spec"].update(ipNATs=[{"internalIP": "10.65.0.2", "externalIP": "1.2.3.4"}]),
        lambda d: d["spec"]["ports"][0].update(hostPort=80),
        lambda d: d["metadata"].update(name="Bad_Name"),
    ],
    ids=["ipv6", "nat", "host-port", "invalid-name"],
)
def test_unusual_endpoints_go_through_the_model(monkeypatch: pytest.MonkeyPatch, change) -> None:
    calls = _model_reads(monkeypatch)
    doc = plain()
    change(doc)
    answer(p.workload_endpoint, ResourceKey("WorkloadEndpoint", "host1-k8s-pod1-eth0", "ns1"), doc)
    assert calls == ["host1-k8s-pod1-eth0"]


def test_invalid_endpoint_keeps_the_model_error() -> None:
    doc = plain()
    doc["spec"]["interfaceName"] = "this-is-too-long-0"
    kind, message = answer(
        p.workload_endpoint, ResourceKey("WorkloadEndpoint", "host1-k8s-pod1-eth0", "ns1"), doc
    )
    assert kind == "error" and "interface name 'this-is-too-long-0' is invalid" in message
