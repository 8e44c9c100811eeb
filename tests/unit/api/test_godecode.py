"""Upstream's decoder semantics (calico.api.godecode) and omitempty output (calico.api.io)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from apihelpers import decode_error, load_one
from hypothesis import given
from hypothesis import strategies as st

from calico.api import dump_resources, load_documents, resource_to_wire
from calico.api.godecode import GoDecodeError, decode_model, go_string
from calico.api.ipam import IPPool

A = "projectcalico.org/v3"
NP = {
    "apiVersion": A,
    "kind": "NetworkPolicy",
    "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"}},
    "spec": {
        "order": 10,
        "selector": "all()",
        "ingress": [{"action": "Allow", "protocol": "TCP", "source": {"ports": [80, "1:2"]}}],
        "egress": [{"action": "Deny", "destination": {"nets": ["10.0.0.0/8"]}}],
    },
}


def recase(data: Any, flips: list[bool]) -> Any:
    """``data`` with the case of every mapping key changed as ``flips`` says (cycled)."""
    counter = iter(range(10**6))
    if not flips:
        return data

    def walk(v: Any, under_labels: bool = False) -> Any:
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                flip = flips[next(counter) % len(flips)] and not under_labels
                key = k.swapcase() if flip else k
                out[key] = walk(x, under_labels=k == "labels")
            return out
        return v

    # apiVersion and kind are read by exact name (upstream's first, untyped pass)
    return {k: v if k in ("apiVersion", "kind") else walk(v) for k, v in data.items()}


@given(st.lists(st.booleans(), max_size=12))
def test_field_names_match_in_any_case(flips: list[bool]) -> None:
    doc = recase(copy.deepcopy(NP), flips)
    (res,) = load_documents(yaml.safe_dump(doc))
    (want,) = load_documents(yaml.safe_dump(NP))
    assert res == want
    assert resource_to_wire(res) == resource_to_wire(want)  # canonical names on output


@given(
    nat=st.booleans(),
    disabled=st.booleans(),
    no_export=st.booleans(),
    block=st.sampled_from([0, 24, 26, 27]),
)
def test_pool_omitempty_round_trips(nat: bool, disabled: bool, no_export: bool, block: int):
    spec: dict[str, Any] = {"cidr": "10.0.0.0/16", "blockSize": block}
    for key, value in (
        ("natOutgoing", nat),
        ("disabled", disabled),
        ("disableBGPExport", no_export),
    ):
        if value:
            spec[key] = True
    pool = IPPool.model_validate({"kind": "IPPool", "metadata": {"name": "p"}, "spec": spec})
    wire = resource_to_wire(pool)
    for key, value in (
        ("natOutgoing", nat),
        ("disabled", disabled),
        ("disableBGPExport", no_export),
    ):
        assert (key in wire["spec"]) is value
    assert wire["spec"]["blockSize"] == (block or 26)
    assert load_documents(dump_resources([pool])) == [pool]


def test_non_omitempty_ipam_fields_print() -> None:
    from calico.api.ipam import IPAMHandle

    handle = IPAMHandle.model_validate(
        {"kind": "IPAMHandle", "metadata": {"name": "h"}, "spec": {"handleID": "h"}}
    )
    assert resource_to_wire(handle)["spec"] == {"handleID": "h", "block": {}, "deleted": False}


@pytest.mark.parametrize(
    ("value", "text"),
    [(True, "true"), (False, "false"), (5663, "5663"), (1.5, "1.5"), (10.0, "10"), ("x", "x")],
)
def test_go_string(value: object, text: str) -> None:
    assert go_string(value) == text


def test_scalars_for_string_fields_become_strings() -> None:
    res = load_one(
        f"apiVersion: {A}\nkind: GlobalNetworkSet\nmetadata:\n  name: s\n"
        "  labels: {a: yes, b: on, c: 010, d: 0x1f, e: 1_000}\n"
    )
    assert res.metadata.labels == {"a": "true", "b": "true", "c": "8", "d": "31", "e": "1000"}


def test_base_60_is_not_a_number() -> None:
    res = load_one(
        f"apiVersion: {A}\nkind: BGPConfiguration\nmetadata: {{name: default}}\n"
        "spec:\n  communities: [{name: c, value: 5663:12}]\n"
    )
    assert res.spec.communities[0].value == "5663:12"


def test_null_is_the_zero_value() -> None:
    res = load_one(f"apiVersion: {A}\nkind: Tier\nmetadata:\n  name: t\n  labels:\nspec:\n")
    assert res.metadata.labels is None and res.spec.order is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "{selector: [a]}",
            "cannot unmarshal array into Go struct field GlobalNetworkPolicySpec.spec.selector "
            "of type string",
        ),
        (
            "{ingress: {action: Allow}}",
            "cannot unmarshal object into Go struct field GlobalNetworkPolicySpec.spec.ingress "
            "of type []v3.Rule",
        ),
        (
            "{ingress: [{action: Allow, protocol: ICMP, icmp: {type: '4'}}]}",
            "cannot unmarshal string into Go struct field ICMPFields.spec.ingress.icmp.type "
            "of type int",
        ),
        (
            "{doNotTrack: 'true'}",
            "cannot parse string 'true' into field GlobalNetworkPolicySpec.doNotTrack of type bool",
        ),
        ("{Bogus: 1}", "field in document is not recognized or is in the wrong location: Bogus"),
    ],
)
def test_go_type_errors(spec: str, message: str) -> None:
    text = f"apiVersion: {A}\nkind: GlobalNetworkPolicy\nmetadata: {{name: p}}\nspec: {spec}\n"
    assert decode_error(text) == message


def test_decode_model_directly() -> None:
    with pytest.raises(GoDecodeError, match="wrong location: colour"):
        decode_model(IPPool, {"spec": {"cidr": "10.0.0.0/8", "colour": "red"}})
    out = decode_model(IPPool, {"SPEC": {"CIDR": "10.0.0.0/8", "natoutgoing": True}})
    assert out == {"spec": {"cidr": "10.0.0.0/8", "natOutgoing": True}}
