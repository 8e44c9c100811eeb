"""The lean Node and Profile reads against their processors (calico.model.processors.leannode,
leanprofile): over generated documents a lean answer is given only where the processor
accepts the document; its v1 values equal the processor's (``repr`` too), and the value under
the ResourceKey (a ``LeanResource``) holds, for every attribute it carries without the model,
exactly the model's value, encodes to the model's wire form and compares equal to the model.
Felix's consumers of the two values read them without building the model."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from calico.felix.calc.dataplane_passthru import host_metadata
from calico.felix.calc.l3_route_resolver import node_info
from calico.felix.calc.profile_decoder import NAMESPACE_LABEL_PREFIX, decode_labels
from calico.model import ResourceKey
from calico.model import processors as p
from calico.model.node_addresses import node_addresses
from calico.model.processors import leannode, leanprofile
from calico.model.processors.leannode import lean_node, lean_node_pod_cidr
from calico.model.processors.leanprofile import lean_profile
from calico.model.processors.leanview import LeanResource, LeanView
from calico.model.values import encode_value
from calico.syncer.definitions import felix_resource_types

ABSENT = object()
NODE_KEY = ResourceKey("Node", "node1")
PROFILE_KEY = ResourceKey("Profile", "kns.ns1")


def one_of(*values: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from(values)


def plain_node(name: str = "node1") -> dict[str, Any]:
    """What calico-node writes for its host."""
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
            "uid": "u1",
            "creationTimestamp": "2026-12-02T07:27:37Z",
        },
        "spec": {
            "bgp": {"ipv4Address": "10.0.0.1/24", "ipv4IPIPTunnelAddr": "10.65.0.1"},
            "addresses": [
                {"address": "10.0.0.1/24", "type": "CalicoNodeIP"},
                {"address": "10.0.0.1", "type": "InternalIP"},
            ],
            "orchRefs": [{"nodeName": name, "orchestrator": "k8s"}],
        },
    }


def plain_profile(name: str = "kns.ns1") -> dict[str, Any]:
    """What the Kubernetes namespace controller writes."""
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": "Profile",
        "metadata": {"name": name, "uid": "u2"},
        "spec": {
            "ingress": [{"action": "Allow"}],
            "egress": [{"action": "Allow"}],
            "labelsToApply": {"pcns.projectcalico.org/name": "ns1", "pcns.team": "a"},
        },
    }


_V4 = one_of("10.0.0.2", "10.0.0.2/24", "10.0.0.0/8", "fd00::1", "fd00::1/64", "x", "", 5, None)
_MAC = one_of("ee:ee:ee:ee:ee:01", "EE-EE-EE-EE-EE-02", "ee:ee", "", 5, None)
_NODE_FIELDS = [
    ("spec", "bgp", one_of({}, {"ipv4Address": "10.0.0.9/16"}, {"asNumber": 64512}, None, 1)),
    ("spec.bgp", "ipv4Address", _V4),
    ("spec.bgp", "ipv6Address", _V4),
    ("spec.bgp", "ipv4IPIPTunnelAddr", _V4),
    ("spec.bgp", "routeReflectorClusterID", _V4),
    ("spec.bgp", "asNumber", one_of(64512, "64512", "1.10")),
    ("spec", "ipv4VXLANTunnelAddr", _V4),
    ("spec", "ipv6VXLANTunnelAddr", _V4),
    ("spec", "vxlanTunnelMACAddr", _MAC),
    ("spec", "vxlanTunnelMACAddrV6", _MAC),
    (
        "spec",
        "wireguard",
        one_of({}, {"interfaceIPv4Address": "10.0.9.1"}, {"interfaceIPv6Address": "fd00::9"}, 1),
    ),
    ("spec.wireguard", "interfaceIPv4Address", _V4),
    (
        "spec",
        "addresses",
        one_of(
            [],
            [{"address": "10.0.0.1"}],
            [{"address": "fd00::1/64", "type": "ExternalIP"}],
            [{"address": "10.0.0.1", "type": "Other"}],
            [{"address": "bad"}],
            [{"address": "10.0.0.1", "type": None}],
            [{"type": "InternalIP"}],
            None,
        ),
    ),
    (
        "spec",
        "orchRefs",
        one_of([], [{"orchestrator": "k8s"}], [{"nodeName": 1, "orchestrator": "k8s"}], [{}]),
    ),
    ("spec", "interfaces", one_of([{"name": "eth0", "addresses": ["10.0.0.1"]}])),
    (
        "",
        "status",
        one_of(
            {},
            {"wireguardPublicKey": "k1"},
            {"wireguardPublicKeyV6": "k2", "wireguardPublicKey": "k1"},
            {"podCIDRs": ["10.244.1.0/24", "bogus"]},
            {"podCIDRs": "10.0.0.0/24"},
            {"bogus": 1},
            None,
        ),
    ),
    ("metadata", "name", one_of("node1", "other", "", None, "Bad_Name")),
    ("metadata", "namespace", one_of("ns1", "", None)),
    ("metadata", "labels", one_of({"a": "b"}, {"-bad": "x"}, {"a": 1}, {}, None)),
    ("metadata", "annotations", one_of({"a": "b"}, {"bad key!": "x"}, None)),
    ("metadata", "resourceVersion", one_of("12", 12)),
    ("metadata", "finalizers", one_of(["x"])),
    ("", "apiVersion", one_of("projectcalico.org/v3", "projectcalico.org/v1", None)),
    ("", "kind", one_of("Node", "Tier", "", None)),
]
_RULES = one_of(
    [{"action": "Allow"}],
    [{"action": "Deny", "protocol": "TCP", "destination": {"ports": [80, "http"]}}],
    [{"action": "Allow", "source": {"selector": "a == 'b'", "nets": ["10.0.0.0/8"]}}],
    [{"action": "Allow", "source": {"namespaceSelector": "all()"}}],
    [{"action": "Allow", "icmp": {"type": 8}}],
    [{"action": "Jump"}],
    [{"action": "Allow", "destination": {"ports": [80]}}],
    [],
    None,
)
_PROFILE_FIELDS = [
    ("spec", "ingress", _RULES),
    ("spec", "egress", _RULES),
    (
        "spec",
        "labelsToApply",
        one_of({}, {"a": "b"}, {"-bad": "x"}, {"a": 1}, {"pcsa.sa": "x"}, None, []),
    ),
    ("spec", "bogus", one_of(1)),
    ("metadata", "name", one_of("kns.ns1", "ksa.ns1.sa", "other", "", None, "Bad_Name")),
    ("metadata", "namespace", one_of("ns1", "", None)),
    ("metadata", "labels", one_of({"a": "b"}, {"-bad": "x"}, None)),
    ("metadata", "annotations", one_of({"a": "b"}, {"bad key!": "x"}, None)),
    ("metadata", "generateName", one_of("x-")),
    ("", "apiVersion", one_of("projectcalico.org/v3", "projectcalico.org/v1", None)),
    ("", "kind", one_of("Profile", "Node", "", None)),
    ("", "status", one_of({})),
]


def _target(doc: dict[str, Any], section: str) -> Any:
    target: Any = doc
    for part in filter(None, section.split(".")):
        if not isinstance(target, dict):
            return None
        target = target.setdefault(part, {}) if part != "bgp" else target.get(part)
    return target if isinstance(target, dict) else None


def _mutate(draw: st.DrawFn, doc: dict[str, Any], fields: list[Any]) -> None:
    for section, name, values in draw(st.lists(st.sampled_from(fields), max_size=4, unique=True)):
        target = _target(doc, section)
        if target is None:
            continue
        value = draw(st.one_of(values, st.just(ABSENT)))
        if value is ABSENT:
            target.pop(name, None)
        else:
            target[name] = value
    if draw(st.integers(0, 19)) == 0:
        doc[draw(one_of("metadata", "spec"))] = draw(one_of(None, [], "x", {}))


@st.composite
def node_documents(draw: st.DrawFn) -> tuple[ResourceKey, Any]:
    name = draw(one_of("node1", "node1", "node-2.example"))
    doc = plain_node(name)
    _mutate(draw, doc, _NODE_FIELDS)
    return ResourceKey("Node", name), json.loads(json.dumps(doc))


@st.composite
def profile_documents(draw: st.DrawFn) -> tuple[ResourceKey, Any]:
    name = draw(one_of("kns.ns1", "ksa.ns1.sa", "allow-all"))
    doc = plain_profile(name)
    _mutate(draw, doc, _PROFILE_FIELDS)
    return ResourceKey("Profile", name), json.loads(json.dumps(doc))


def answer(processor: Any, key: ResourceKey, doc: Any) -> tuple[str, Any]:
    try:
        return "ok", dict(processor(key, copy.deepcopy(doc)))
    except ValueError as exc:
        return "error", str(exc)


def assert_view(view: Any, model: Any, where: str = "") -> None:
    """Every attribute the view carries without the model is the model's, type and value."""
    assert isinstance(view, LeanView)
    held = {k: x for k, x in vars(view).items() if k not in ("_fallback", "model")}
    assert held, where
    for name, got in held.items():
        want = getattr(model, name)
        if isinstance(got, LeanView):
            assert_view(got, want, f"{where}.{name}")
        elif isinstance(got, list) and got and isinstance(got[0], LeanView):
            assert isinstance(want, list) and len(got) == len(want), f"{where}.{name}"
            for i, (g, w) in enumerate(zip(got, want, strict=True)):
                assert_view(g, w, f"{where}.{name}[{i}]")
        else:
            assert type(got) is type(want), f"{where}.{name}: {got!r} vs {want!r}"
            assert got == want, f"{where}.{name}"


def check(processor: Any, lean: Any, key: ResourceKey, doc: Any) -> bool:
    """The lean answer (if any) is the processor's: v1 values equal (and ``repr``-equal),
    the resource's view matches the model, encodes as it, compares and pickles as it."""
    expected = answer(processor, key, doc)
    before = copy.deepcopy(doc)
    got = lean(key, doc)
    assert doc == before
    if got is None:
        return False
    assert expected[0] == "ok", expected
    want = expected[1]
    assert list(got) == list(want)
    for k, value in got.items():
        if k == key:
            assert isinstance(value, LeanResource)
            assert_view(value, want[k])
            assert value == want[k] and want[k] == value
            assert encode_value(k, value) == encode_value(k, want[k])
            assert json.dumps(value.to_wire()) == json.dumps(want[k].to_wire())
            assert pickle.loads(pickle.dumps(value)) == want[k]
            assert repr(value) == repr(want[k])
        else:
            assert value == want[k] and repr(value) == repr(want[k])
    return True


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(node_documents())
@example((NODE_KEY, plain_node()))
def test_lean_node_equals_the_processor(case: tuple[ResourceKey, Any]) -> None:
    check(p.node, lean_node, *case)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(node_documents())
def test_lean_node_pod_cidr_equals_the_processor(case: tuple[ResourceKey, Any]) -> None:
    check(p.node_pod_cidr, lean_node_pod_cidr, *case)


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(profile_documents())
@example((PROFILE_KEY, plain_profile()))
def test_lean_profile_equals_the_processor(case: tuple[ResourceKey, Any]) -> None:
    check(p.profile, lean_profile, *case)


def test_plain_shapes_take_the_lean_path() -> None:
    assert check(p.node, lean_node, NODE_KEY, plain_node())
    node = plain_node()
    node["spec"] |= {"ipv4VXLANTunnelAddr": "10.65.1.0", "vxlanTunnelMACAddr": "ee:ee:ee:00:00:01"}
    node["spec"]["wireguard"] = {"interfaceIPv4Address": "10.65.2.0"}
    node["status"] = {"wireguardPublicKey": "k1", "podCIDRs": ["10.244.1.0/24"]}
    assert check(p.node, lean_node, NODE_KEY, node)
    assert check(p.node_pod_cidr, lean_node_pod_cidr, NODE_KEY, node)
    assert check(p.profile, lean_profile, PROFILE_KEY, plain_profile())
    bench = {"kind": "Profile", "metadata": {"name": "kns.bench"}, "spec": {"egress": []}}
    assert check(p.profile, lean_profile, ResourceKey("Profile", "kns.bench"), bench)


def test_declines_what_the_model_must_decide() -> None:
    node = plain_node()
    node["spec"]["bgp"]["asNumber"] = 64512  # ASNumber's coercions: the model's
    assert lean_node(NODE_KEY, node) is None
    node = plain_node()
    node["spec"]["bgp"]["ipv4Address"] = "fd00::1/64"  # invalid: the processor's error
    assert lean_node(NODE_KEY, node) is None and answer(p.node, NODE_KEY, node)[0] == "error"
    profile = plain_profile()
    profile["spec"]["ingress"] = [{"action": "Allow", "icmp": {"type": 8}}]
    assert lean_profile(PROFILE_KEY, profile) is None


def test_felix_syncer_types_use_the_lean_reads() -> None:
    types = {t.kind: t for t in felix_resource_types()}
    assert types["Node"].lean is lean_node and types["Profile"].lean is lean_profile
    pod_cidr = {t.kind: t for t in felix_resource_types(use_pod_cidr=True)}
    assert pod_cidr["Node"].lean is lean_node_pod_cidr


def test_consumers_read_the_values_without_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Felix's calc graph reads of a Node and a Profile is in the view: reading it builds
    no model (the class loaders would raise), and gives what the model gives."""
    node, profile = plain_node(), plain_profile()
    node["spec"]["ipv4VXLANTunnelAddr"] = "10.65.1.0"
    node["spec"]["wireguard"] = {"interfaceIPv4Address": "10.65.2.0"}
    lean_n = (lean_node(NODE_KEY, node) or {})[NODE_KEY]
    lean_p = (lean_profile(PROFILE_KEY, profile) or {})[PROFILE_KEY]
    model_n = p.node(NODE_KEY, node)[NODE_KEY]
    model_p = p.profile(PROFILE_KEY, profile)[PROFILE_KEY]

    def refuse() -> type:
        raise AssertionError("the model was built")

    monkeypatch.setattr(leannode, "_node_class", refuse)
    monkeypatch.setattr(leanprofile, "_profile_class", refuse)
    lean_n = (lean_node(NODE_KEY, node) or {})[NODE_KEY]
    lean_p = (lean_profile(PROFILE_KEY, profile) or {})[PROFILE_KEY]
    assert node_info(lean_n) == node_info(model_n)
    assert node_addresses(lean_n) == node_addresses(model_n)
    assert host_metadata("node1", lean_n) == host_metadata("node1", model_n)
    assert dict(lean_n.metadata.labels) == dict(model_n.metadata.labels or {})
    assert decode_labels(NAMESPACE_LABEL_PREFIX, lean_p) == decode_labels(
        NAMESPACE_LABEL_PREFIX, model_p
    )
    with pytest.raises(AssertionError, match="the model was built"):
        lean_p.spec.ingress  # noqa: B018  (not in the view: from the model)
