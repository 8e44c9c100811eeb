"""The lean Tier and NetworkPolicy reads against the models (calico.model.processors.leanpolicy):
over generated documents, valid and not, a lean answer is only given for a document the
processor accepts, and it equals the processor's output field by field; everything else is
declined (None, never an error), so the processor's error messages stay the only ones."""

from __future__ import annotations

import copy
import json
import logging
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from calico.model import ResourceKey
from calico.model import processors as p
from calico.model.processors.leanpolicy import lean_network_policy, lean_tier
from calico.syncer.definitions import felix_resource_types
from calico.syncer.watchersyncer import _WatcherCache

ABSENT = object()
NP_KEY = ResourceKey("NetworkPolicy", "allow-web", "ns1")


def one_of(*values: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from(values)


def plain_policy() -> dict[str, Any]:
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": "allow-web",
            "namespace": "ns1",
            "uid": "1a14332b-fa21-4b69-a755-b3b1c94d72e7",
            "creationTimestamp": "2026-12-02T07:27:37Z",
        },
        "spec": {
            "ingress": [
                {
                    "action": "Allow",
                    "destination": {"ports": [9001]},
                    "protocol": "TCP",
                    "source": {"selector": "role == 'r1'"},
                }
            ],
            "selector": "group == 'g1'",
            "tier": "default",
            "types": ["Ingress"],
        },
    }


def plain_tier(name: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": "Tier",
        "metadata": {"name": name, "uid": "a09d31d9", "creationTimestamp": "2026-12-02T07:27:37Z"},
        "spec": {"defaultAction": "Deny", "order": 1000000},
    }


_SELECTORS = one_of(
    "role == 'r1'", "", "all()", "has(app)", "a == ", "global()", "x" * 1025, 5, None, "!has(x)"
)
_NETS = st.one_of(
    st.lists(one_of("10.0.0.0/8", "10.0.0.1", "10.0.0.1/8", "fd00::/64", "bad", "", 1), max_size=3),
    one_of(None, "10.0.0.0/8"),
)
_ENTITY_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "selector": _SELECTORS,
    "notSelector": _SELECTORS,
    "namespaceSelector": _SELECTORS,
    "nets": _NETS,
    "notNets": _NETS,
    "ports": st.one_of(
        st.lists(
            one_of(80, "80", "1000:2000", "2000:1000", "80:80", "http", "Bad", 0, 65536, True, 8.0),
            max_size=3,
        ),
        one_of(None, 80, [80] * 51),
    ),
    "notPorts": one_of([80], None),
    "services": one_of({"name": "svc"}, None),
    "serviceAccounts": one_of({"names": ["sa"]}, None),
    "bogus": one_of(1),
}


@st.composite
def _entity(draw: st.DrawFn) -> Any:
    ent: dict[str, Any] = {"selector": "role == 'r1'"}
    for name in draw(st.lists(st.sampled_from(sorted(_ENTITY_FIELDS)), max_size=3, unique=True)):
        value = draw(st.one_of(_ENTITY_FIELDS[name], st.just(ABSENT)))
        if value is ABSENT:
            ent.pop(name, None)
        else:
            ent[name] = value
    return draw(st.one_of(st.just(ent), one_of(None, {}, [], "x")))


_PROTOCOLS = one_of("TCP", "UDP", "SCTP", "ICMP", "ICMPv6", "tcp", "6", 17, 1, 0, 256, True, None)
_RULE_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "action": one_of("Allow", "Deny", "Log", "Pass", "allow", "", None, 1),
    "protocol": _PROTOCOLS,
    "notProtocol": _PROTOCOLS,
    "source": _entity(),
    "destination": _entity(),
    "ipVersion": one_of(4, 6, 5, None),
    "icmp": one_of({"type": 8}, None),
    "http": one_of({"methods": ["GET"]}, None),
    "metadata": one_of({"annotations": {"a": "b"}}, None),
    "bogus": one_of(1),
}


@st.composite
def _rule(draw: st.DrawFn) -> Any:
    rule: dict[str, Any] = {"action": "Allow", "protocol": "TCP", "destination": {"ports": [80]}}
    for name in draw(st.lists(st.sampled_from(sorted(_RULE_FIELDS)), max_size=3, unique=True)):
        value = draw(st.one_of(_RULE_FIELDS[name], st.just(ABSENT)))
        if value is ABSENT:
            rule.pop(name, None)
        else:
            rule[name] = value
    return draw(st.one_of(st.just(rule), one_of(None, "x", {})))


_RULES = st.one_of(st.lists(_rule(), max_size=3), one_of(None, {}, "x"))
_META_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "name": one_of("allow-web", "Bad_Name", "", None, 5, "a" * 254, "t1.allow-web", "a.b.c"),
    "namespace": one_of("ns1", "ns2", "NS", "", None, "a" * 64, 3),
    "labels": one_of({"a": "b"}, {"-bad": "x"}, {"a": "bad value"}, {"a": 1}, None, ["a"]),
    "annotations": one_of({"a": "b"}, {"bad key!": "x"}, {"a": "x" * 262144}, {"a": 1}, None),
    "uid": one_of("5b6e3c1a", 7, None),
    "resourceVersion": one_of("12", 12),
    "generateName": one_of("np-"),
    "finalizers": one_of(["x"]),
    "bogus": one_of(1),
}
_NP_SPEC_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "tier": one_of("default", "t1", "", "T1", None, 1, "a.b"),
    "order": one_of(100, 0, -5, 2**60, 10.5, 1e308, True, "5", None),
    "selector": _SELECTORS,
    "serviceAccountSelector": one_of("has(x)", None),
    "types": one_of(
        ["Ingress"],
        ["Egress"],
        ["Ingress", "Egress"],
        [],
        ["Ingress", "Ingress"],
        ["x"],
        None,
        [{}],
        "Ingress",
        ["Ingress", "Egress", "Ingress"],
    ),
    "ingress": _RULES,
    "egress": _RULES,
    "performanceHints": one_of(["AssumeNeededOnEveryNode"], None),
    "bogus": one_of(1),
}
_TOP_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "apiVersion": one_of("projectcalico.org/v3", "projectcalico.org/v1", None, 3),
    "kind": one_of("NetworkPolicy", "Tier", "GlobalNetworkPolicy", "", None),
    "status": one_of({}, None),
}
_TIER_SPEC_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "order": one_of(1000000, 1000, 10000000, 5, 1000000.5, 2**60, True, "5", None),
    "defaultAction": one_of("Deny", "Pass", "Allow", "deny", None, 1),
    "bogus": one_of(1),
}
_TIER_META_FIELDS = {
    **_META_FIELDS,
    "name": one_of("default", "kube-admin", "kube-baseline", "t1", "T1", "a.b", "", None),
    "namespace": one_of("ns1", "", None),
}


def _mutate(draw: st.DrawFn, doc: dict[str, Any], fields: list[Any], n: int) -> None:
    for section, name, values in draw(st.lists(st.sampled_from(fields), max_size=n, unique=True)):
        target = doc[section] if section else doc
        value = draw(st.one_of(values, st.just(ABSENT)))
        if value is ABSENT:
            target.pop(name, None)
        else:
            target[name] = value
    for section in draw(st.lists(one_of("metadata", "spec"), max_size=1)):
        if draw(st.integers(0, 9)) == 0:
            doc[section] = draw(one_of(None, [], "x", {}))


def _fields(*sections: tuple[str, dict[str, Any]]) -> list[Any]:
    return [(s, name, v) for s, fields in sections for name, v in sorted(fields.items())]


_NP_FIELDS = _fields(("metadata", _META_FIELDS), ("spec", _NP_SPEC_FIELDS), ("", _TOP_FIELDS))
_TIER_FIELDS = _fields(
    ("metadata", _TIER_META_FIELDS), ("spec", _TIER_SPEC_FIELDS), ("", _TOP_FIELDS)
)


@st.composite
def policies(draw: st.DrawFn) -> tuple[ResourceKey, Any]:
    doc = plain_policy()
    _mutate(draw, doc, _NP_FIELDS, 3)
    if draw(st.integers(0, 2)) == 0 and isinstance(doc.get("spec"), dict):
        doc["spec"][draw(one_of("ingress", "egress"))] = [draw(_rule())]  # rules: often
    key = ResourceKey("NetworkPolicy", "allow-web", draw(one_of("ns1", "ns1", "ns2")))
    return key, json.loads(json.dumps(doc))


@st.composite
def tiers(draw: st.DrawFn) -> tuple[ResourceKey, Any]:
    name = draw(one_of("default", "kube-admin", "kube-baseline", "t1"))
    doc = plain_tier(name)
    if name != "default":
        doc["spec"]["defaultAction"] = "Pass" if name.startswith("kube") else "Deny"
        doc["spec"]["order"] = {"kube-admin": 1000, "kube-baseline": 10000000}.get(name, 50)
    _mutate(draw, doc, _TIER_FIELDS, 2)
    return ResourceKey("Tier", name), json.loads(json.dumps(doc))


def answer(process: Any, key: ResourceKey, doc: Any) -> tuple[str, Any]:
    try:
        return "ok", dict(process(key, copy.deepcopy(doc)))
    except ValueError as exc:
        return "error", str(exc)


def _check(lean: Any, processor: Any, key: ResourceKey, doc: Any) -> bool:
    expected = answer(processor, key, doc)
    before = copy.deepcopy(doc)
    got = lean(key, doc)
    assert doc == before  # the lean read never changes the document
    if got is None:
        return False
    assert expected[0] == "ok", expected
    assert got == expected[1]
    for have, want in zip(got.values(), expected[1].values(), strict=True):
        assert repr(have) == repr(want)  # field by field, types included
    return True


@settings(max_examples=2000, suppress_health_check=[HealthCheck.too_slow])
@given(policies())
@example((NP_KEY, plain_policy()))
def test_lean_network_policy_equals_the_processor(case: tuple[ResourceKey, Any]) -> None:
    _check(lean_network_policy, p.network_policy, *case)


@settings(max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
@given(tiers())
@example((ResourceKey("Tier", "default"), plain_tier()))
def test_lean_tier_equals_the_processor(case: tuple[ResourceKey, Any]) -> None:
    _check(lean_tier, p.tier, *case)


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"selector": "", "ingress": [], "egress": []},
        {"egress": [{"action": "Deny", "destination": {"nets": ["10.0.0.0/8"]}}]},
        {
            "tier": "t1",
            "order": 5,
            "ingress": [{"action": "Pass", "notProtocol": "UDP", "source": {}}],
            "egress": [{"action": "Log", "protocol": 6, "destination": {"ports": ["1:2", "h"]}}],
        },
    ],
    ids=["empty", "blank", "egress-only", "mixed"],
)
def test_common_policies_take_the_lean_path(spec: dict[str, Any]) -> None:
    doc = plain_policy()
    doc["spec"] = spec
    assert _check(lean_network_policy, p.network_policy, NP_KEY, doc)


def test_bench_shapes_take_the_lean_path() -> None:
    assert _check(lean_network_policy, p.network_policy, NP_KEY, plain_policy())
    for name, order, action in (
        ("default", 1000000, "Deny"),
        ("kube-admin", 1000, "Pass"),
        ("kube-baseline", 10000000, "Pass"),
    ):
        doc = plain_tier(name)
        doc["spec"] = {"order": order, "defaultAction": action}
        assert _check(lean_tier, p.tier, ResourceKey("Tier", name), doc)


def _cache(kind: str) -> _WatcherCache:
    (rtype,) = [t for t in felix_resource_types() if t.kind == kind]
    return _WatcherCache(0, rtype, None, None, threading.Event())  # type: ignore[arg-type]


def test_felix_syncer_reads_policies_and_tiers_lean(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Felix syncer's NetworkPolicy and Tier types try the lean read first and fall back
    to the processor, whose warning for a bad document is the one it always gave."""
    from calico.model.processors import policy

    calls: list[str] = []
    real = policy._model

    def counting(kind: str) -> Any:
        calls.append(kind)
        return real(kind)

    monkeypatch.setattr(policy, "_model", counting)
    cache = _cache("NetworkPolicy")
    out = cache._convert(NP_KEY, json.dumps(plain_policy()))
    assert out == dict(p.network_policy(NP_KEY, plain_policy()))
    assert calls == ["NetworkPolicy"]  # only the reference call above
    tier_out = _cache("Tier")._convert(ResourceKey("Tier", "default"), json.dumps(plain_tier()))
    assert len(tier_out) == 1 and calls == ["NetworkPolicy"]


def test_bad_policy_keeps_the_processor_warning(caplog: pytest.LogCaptureFixture) -> None:
    doc = plain_policy()
    doc["spec"]["ingress"][0]["protocol"] = "ICMP"  # ports need TCP, UDP or SCTP
    cache = _cache("NetworkPolicy")
    with caplog.at_level(logging.WARNING, logger="calico.syncer.watchersyncer"):
        assert cache._convert(NP_KEY, json.dumps(doc)) == {}
    kind, message = answer(p.network_policy, NP_KEY, doc)
    assert kind == "error"
    assert [r.getMessage() for r in caplog.records] == [
        f"Failed to process key={NP_KEY.default_path()}: {message}"
    ]
