"""The v1 value codec: Go omitempty/nil rules, typed decoding errors, and round trips.

Property tests generate values of every V1Value class from its own field declarations, so a
field added later is covered without editing this file.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calico.model import (
    GlobalBGPPeerKey,
    GlobalConfigKey,
    HostEndpointKey,
    IPAMHandleKey,
    PolicyKey,
    ReadyFlagKey,
    ResourceKey,
    WorkloadEndpointKey,
)
from calico.model import values as v1
from calico.model.values import VALUE_CLASSES, V1Value, ValueJSONError, decode_value, encode_value

TEXT = st.text(max_size=8)
SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "str": TEXT,
    "bool": st.booleans(),
    "int": st.integers(-(2**31), 2**31),
    "int?": st.none() | st.integers(0, 1000),
    "float": st.floats(allow_nan=False, allow_infinity=False),
    "int|str": st.integers(0, 65535) | TEXT,
    "labels": st.dictionaries(TEXT, TEXT, max_size=3),
    "any": st.none() | st.integers() | TEXT | st.lists(st.integers(), max_size=2),
}
CLASSES = sorted({*VALUE_CLASSES.values(), v1.Rule, v1.EndpointPort}, key=lambda c: c.__name__)


def field_strategy(f: dataclasses.Field[Any]) -> st.SearchStrategy[Any]:
    shape = f.metadata["json"]
    kind, item, pointer = shape.kind, shape.item, shape.pointer
    if kind == "list":
        inner = values_of(item) if isinstance(item, type) else SCALARS[item]
        return st.lists(inner, max_size=2).map(tuple)
    if kind == "nested":
        return st.none() | values_of(item)
    base = SCALARS[kind]
    return st.none() | base if pointer and kind != "any" else base


def values_of(cls: type[V1Value]) -> st.SearchStrategy[Any]:
    fields = {f.name: field_strategy(f) for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_value_round_trips_through_its_json(cls: type[V1Value], data: st.DataObject) -> None:
    value = data.draw(values_of(cls))
    wire = json.loads(json.dumps(value.to_json()))
    assert cls.from_json(wire) == value


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=80, deadline=None)
@given(doc=JSON)
def test_decoding_arbitrary_json_fails_only_with_a_value_error(
    cls: type[V1Value], doc: Any
) -> None:
    try:
        value = cls.from_json(doc)
    except ValueJSONError:
        return
    assert cls.from_json(value.to_json()) == value


def test_go_omitempty_and_nil_rules() -> None:
    # WorkloadEndpoint: non-omitempty nil slices and pointers are null, omitempty ones absent.
    assert v1.WorkloadEndpoint(state="active", name="c").to_json() == {
        "state": "active",
        "name": "c",
        "active_instance_id": "",
        "mac": None,
        "profile_ids": None,
        "ipv4_nets": None,
        "ipv6_nets": None,
    }
    # Pointer semantics: order 0 is a value (emitted), only None is omitted.
    assert v1.Policy(order=0.0).to_json() == {"order": 0.0, "selector": ""}
    assert v1.Policy().to_json() == {"selector": ""}
    assert v1.Tier(order=None, default_action="").to_json() == {}
    # Slices upstream always writes as [] keep [] when empty.
    assert v1.ProfileRules().to_json() == {"inbound_rules": [], "outbound_rules": []}
    # A nested pointer that is set is emitted even when empty.
    assert v1.Rule(http=v1.HTTPMatch()).to_json() == {"action": "allow", "http": {}}
    # The bare-map value.
    assert v1.ProfileLabels({"a": "b"}).to_json() == {"a": "b"}


def test_missing_and_null_decode_to_the_zero_value() -> None:
    assert v1.Rule.from_json({}) == v1.Rule(action="allow")
    assert v1.Rule.from_json({"action": None, "src_ports": None}) == v1.Rule()
    assert v1.WorkloadEndpoint.from_json({"labels": None}).labels == {}


@pytest.mark.parametrize(
    ("cls", "doc", "message"),
    [
        (v1.Policy, [], "Policy: expected a JSON object, got []"),
        (v1.Policy, {"order": "1"}, "Policy.order: expected a number, got '1'"),
        (v1.Policy, {"untracked": 1}, "Policy.untracked: expected a boolean, got 1"),
        (v1.Rule, {"src_nets": "10.0.0.0/8"}, "Rule.src_nets: expected a list, got '10.0.0.0/8'"),
        (
            v1.Rule,
            {"dst_ports": [80, None]},
            "Rule.dst_ports: expected list items that are each a number or a string, got None",
        ),
        (v1.EndpointPort, {"port": True}, "EndpointPort.port: expected an integer, got True"),
        (
            v1.WorkloadEndpoint,
            {"labels": {"a": 1}},
            "WorkloadEndpoint.labels: expected an object of strings, got {'a': 1}",
        ),
        (v1.ProfileLabels, {"a": 1}, "ProfileLabels: expected an object of strings, got {'a': 1}"),
    ],
)
def test_decoding_errors_name_the_class_and_field(cls: Any, doc: Any, message: str) -> None:
    with pytest.raises(ValueJSONError) as exc:
        cls.from_json(doc)
    assert str(exc.value) == message


def test_boundary_codec_by_key_type() -> None:
    wep = WorkloadEndpointKey("h", "k8s", "ns/p", "eth0")
    value = v1.WorkloadEndpoint(name="cali1", ipv4_nets=("10.0.0.1/32",))
    assert decode_value(wep, encode_value(wep, value)) == value
    assert encode_value(GlobalConfigKey("LogSeverityScreen"), "Info") == "Info"
    assert decode_value(ReadyFlagKey(), True) is True
    peer = GlobalBGPPeerKey("10.0.0.1")
    assert decode_value(peer, {"ip": "10.0.0.1", "as_num": "64512"}) == v1.BGPPeer(
        "10.0.0.1", "64512"
    )
    assert encode_value(wep, None) is None and decode_value(wep, None) is None
    with pytest.raises(ValueJSONError, match="carries WorkloadEndpoint: HostEndpoint"):
        encode_value(wep, v1.HostEndpoint())
    with pytest.raises(ValueJSONError, match="expected a bool: 'true'"):
        decode_value(ReadyFlagKey(), "true")
    with pytest.raises(ValueJSONError, match="carries a str: 1"):
        encode_value(GlobalConfigKey("x"), 1)
    with pytest.raises(ValueJSONError, match="IPAMHandleKey has no v1 value type"):
        decode_value(IPAMHandleKey("h"), {})
    assert type(decode_value(HostEndpointKey("h", "e"), {})) is v1.HostEndpoint
    assert (
        decode_value(PolicyKey("GlobalNetworkPolicy", "", "p"), {"selector": "x"}).selector == "x"
    )


def test_resource_values_are_the_v3_resources() -> None:
    key = ResourceKey("Node", "n1")
    node = decode_value(key, {"spec": {"bgp": {"ipv4Address": "10.0.0.1/24"}}})
    assert node.metadata.name == "n1" and node.spec.bgp.ipv4_address == "10.0.0.1/24"
    assert decode_value(key, encode_value(key, node)) == node
    with pytest.raises(ValueJSONError):
        decode_value(key, {"spec": {"bgp": {"ipv4Address": "not an address"}}})
    with pytest.raises(ValueJSONError, match=r"not a projectcalico\.org/v3 kind"):
        decode_value(ResourceKey("LiveMigration", "s", "ns"), {})
    # Services and EndpointSlices (Kubernetes datastore) are the API's JSON itself.
    assert decode_value(ResourceKey("KubernetesService", "s", "ns"), {"spec": {}}) == {"spec": {}}
