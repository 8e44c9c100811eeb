"""Property test: on any resource the v3 models accept, processors return typed values under
keys whose paths parse back to them, whose v1 JSON decodes back to the same value, and never
raise anything but ValueError."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from calico.api import APIError, parse_resource
from calico.model import ResourceKey, key_from_default_path
from calico.model.processors import process
from calico.model.values import decode_value, encode_value

V3 = "/calico/resources/v3/projectcalico.org/"
SELECTORS = st.sampled_from(
    ["", "all()", "app == 'a'", "has(x) && y != 'z'", "k in {'a', 'b'}", "!has(role)"]
)
NETS = st.lists(st.sampled_from(["10.0.0.0/8", "192.168.1.1/32", "fd00::/64"]), max_size=2)
PORTS = st.lists(st.sampled_from([80, "8080:8090", "http"]), max_size=2)
LABELS = st.dictionaries(st.sampled_from(["app", "role", "pcns.x"]), st.sampled_from(["a", "b"]))


@st.composite
def entity(draw: st.DrawFn) -> dict[str, Any]:
    ent: dict[str, Any] = {}
    for field, strat in (
        ("selector", SELECTORS),
        ("notSelector", SELECTORS),
        ("namespaceSelector", st.sampled_from(["", "all()", "global()", "env == 'p'"])),
        ("nets", NETS),
        ("notNets", NETS),
        ("ports", PORTS),
        ("notPorts", PORTS),
    ):
        if draw(st.booleans()) and (value := draw(strat)):
            ent[field] = value
    if draw(st.booleans()):
        ent["serviceAccounts"] = {"names": ["sa1"], "selector": "x == 'y'"}
    return ent


@st.composite
def rule(draw: st.DrawFn) -> dict[str, Any]:
    r: dict[str, Any] = {"action": draw(st.sampled_from(["Allow", "Deny", "Log", "Pass"]))}
    proto = draw(st.sampled_from([None, "TCP", "UDP", "ICMP", 17]))
    if proto is not None:
        r["protocol"] = proto
    if proto == "ICMP" and draw(st.booleans()):
        r["icmp"] = {"type": draw(st.integers(0, 254)), "code": draw(st.integers(0, 255))}
    if draw(st.booleans()):
        r["source"] = draw(entity())
    if draw(st.booleans()):
        r["destination"] = draw(entity())
    return r


@st.composite
def resource(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    kind = draw(
        st.sampled_from(
            [
                "NetworkPolicy",
                "GlobalNetworkPolicy",
                "StagedNetworkPolicy",
                "Profile",
                "WorkloadEndpoint",
                "NetworkSet",
            ]
        )
    )
    meta: dict[str, Any] = {"name": "x", "labels": draw(LABELS)}
    rules = {
        "ingress": draw(st.lists(rule(), max_size=3)),
        "egress": draw(st.lists(rule(), max_size=2)),
    }
    path = (
        V3
        + {
            "NetworkPolicy": "networkpolicies/ns1/x",
            "GlobalNetworkPolicy": "globalnetworkpolicies/x",
            "StagedNetworkPolicy": "stagednetworkpolicies/ns1/x",
            "Profile": "profiles/x",
            "WorkloadEndpoint": "workloadendpoints/ns1/n1-k8s-pod-eth0",
            "NetworkSet": "networksets/ns1/x",
        }[kind]
    )
    if kind == "Profile":
        spec: dict[str, Any] = {**rules, "labelsToApply": draw(LABELS)}
    elif kind.endswith("Policy"):
        spec = {**rules, "selector": draw(SELECTORS)}
        if kind == "GlobalNetworkPolicy":
            spec["namespaceSelector"] = draw(st.sampled_from(["", "all()", "env == 'p'"]))
            spec["serviceAccountSelector"] = draw(SELECTORS)
    elif kind == "WorkloadEndpoint":
        meta["name"] = "n1-k8s-pod-eth0"
        spec = {
            "node": "n1",
            "orchestrator": "k8s",
            "interfaceName": "cali1",
            "ipNetworks": draw(
                st.lists(st.sampled_from(["10.0.0.1/32", "fd00::1/128"]), max_size=2)
            ),
        }
    else:
        spec = {"nets": draw(NETS)}
    if kind in ("NetworkPolicy", "StagedNetworkPolicy", "WorkloadEndpoint", "NetworkSet"):
        meta["namespace"] = "ns1"
    return path, {
        "apiVersion": "projectcalico.org/v3",
        "kind": kind,
        "metadata": meta,
        "spec": spec,
    }


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(resource())
def test_processors_total_on_valid_resources(item: tuple[str, dict[str, Any]]) -> None:
    path, value = item
    try:
        parse_resource(json.loads(json.dumps(value)))
    except APIError:
        assume(False)
    source = key_from_default_path(path)
    assert isinstance(source, ResourceKey)
    try:
        out = process(source, value)
    except ValueError:
        return
    for key, typed in out.items():
        assert key_from_default_path(key.default_path()) == key
        data = json.loads(json.dumps(encode_value(key, typed)))
        assert decode_value(key, data) == typed
