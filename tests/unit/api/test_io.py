"""Loading and dumping: document shapes, error locations, output shape, property tests."""

from __future__ import annotations

import contextlib
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calico.api import (
    APIError,
    DocumentFormatError,
    ResourceValidationError,
    UnknownKindError,
    dump_resources,
    load_documents,
    load_file,
    with_default_namespace,
)
from calico.api.io import format_loc

GNP = "apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata:\n  name: {name}\n"
NS = "apiVersion: projectcalico.org/v3\nkind: NetworkSet\nmetadata:\n  name: {name}\n"


def test_multi_document_stream_skips_empty_documents() -> None:
    text = "---\n" + GNP.format(name="a") + "---\n# just a comment\n---\n" + GNP.format(name="b")
    names = [r.metadata.name for r in load_documents(text)]
    assert names == ["a", "b"]
    assert load_documents("") == []
    assert load_documents("# nothing\n---\n") == []


def test_json_object_and_array() -> None:
    obj = {"apiVersion": "projectcalico.org/v3", "kind": "Tier", "metadata": {"name": "t"}}
    (tier,) = load_documents(json.dumps(obj))
    assert tier.kind == "Tier"
    resources = load_documents(json.dumps([obj, {**obj, "metadata": {"name": "u"}}]))
    assert [r.metadata.name for r in resources] == ["t", "u"]


def test_yaml_sequence_of_resources() -> None:
    resources = load_documents(f"- {json.dumps(yaml.safe_load(GNP.format(name='a')))}\n")
    assert resources[0].metadata.name == "a"


def test_kind_list_and_typed_list() -> None:
    text = textwrap.dedent(
        """\
        apiVersion: v1
        kind: List
        items:
        - apiVersion: projectcalico.org/v3
          kind: Tier
          metadata: {name: t1}
        - apiVersion: projectcalico.org/v3
          kind: Profile
          metadata: {name: p1}
        ---
        apiVersion: projectcalico.org/v3
        kind: NetworkSetList
        metadata: {resourceVersion: "12"}
        items:
        - metadata: {name: n1, namespace: ns}
          spec: {nets: [10.0.0.0/8]}
        """
    )
    resources = load_documents(text)
    assert [(r.kind, r.metadata.name) for r in resources] == [
        ("Tier", "t1"),
        ("Profile", "p1"),
        ("NetworkSet", "n1"),
    ]


def test_error_names_source_document_item_kind_name_and_path() -> None:
    text = (
        GNP.format(name="ok")
        + "---\n"
        + textwrap.dedent(
            """\
        apiVersion: projectcalico.org/v3
        kind: GlobalNetworkSetList
        items:
        - metadata: {name: good}
        - metadata: {name: bad}
          spec: {nets: [not-a-cidr]}
        """
        )
    )
    with pytest.raises(ResourceValidationError) as info:
        load_documents(text, source="sets.yaml")
    err = info.value
    assert (err.source, err.document, err.item, err.kind, err.name) == (
        "sets.yaml",
        2,
        2,
        "GlobalNetworkSet",
        "bad",
    )
    assert str(err) == (
        "sets.yaml, document 2, item 2, GlobalNetworkSet(bad): spec.nets: 'not-a-cidr' is not a "
        "valid CIDR"
    )


def test_unknown_field_message_is_calicoctl_text() -> None:
    """Upstream's decoder refuses the document; the message names the field alone."""
    text = GNP.format(name="p") + "spec:\n  ingress:\n  - action: Allow\n    foo: 1\n"
    with pytest.raises(DocumentFormatError) as info:
        load_documents(text, source="p.yaml")
    assert str(info.value) == (
        "p.yaml, document 1, GlobalNetworkPolicy(p): field in document is not recognized or is "
        "in the wrong location: foo"
    )


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        (
            "apiVersion: projectcalico.org/v2\nkind: Tier\nmetadata: {name: t}\n",
            UnknownKindError,
            "x.yaml, document 1: unknown resource type (Tier) and/or version "
            "(projectcalico.org/v2)",
        ),
        (
            "apiVersion: projectcalico.org/v3\nkind: networkpolicy\nmetadata: {name: t}\n",
            UnknownKindError,
            "x.yaml, document 1: unknown resource type (networkpolicy) and/or version "
            "(projectcalico.org/v3)",
        ),
        (
            "apiVersion: projectcalico.org/v3\nkind: Frobnicator\n",
            UnknownKindError,
            "x.yaml, document 1: unknown resource type (Frobnicator) and/or version "
            "(projectcalico.org/v3)",
        ),
        (
            "kind: Tier\nmetadata: {name: t}\n",
            DocumentFormatError,
            "x.yaml, document 1: apiVersion is required (expected projectcalico.org/v3)",
        ),
        (
            "apiVersion: projectcalico.org/v3\nmetadata: {name: t}\n",
            DocumentFormatError,
            "x.yaml, document 1: kind is required and must be a string",
        ),
        (
            "just a string\n",
            DocumentFormatError,
            "x.yaml, document 1: expected a resource (a mapping with apiVersion, kind, metadata "
            "and spec), got str",
        ),
        (
            "- 1\n- 2\n",
            DocumentFormatError,
            "x.yaml, document 1, item 1: expected a resource",
        ),
        (
            "apiVersion: projectcalico.org/v3\nkind: NetworkPolicyList\nitems: 5\n",
            DocumentFormatError,
            "x.yaml, document 1: NetworkPolicyList items must be a list",
        ),
    ],
)
def test_document_level_errors(text: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as info:
        load_documents(text, source="x.yaml")
    assert str(info.value).startswith(message)


def test_invalid_yaml_names_the_document() -> None:
    text = GNP.format(name="a") + "---\nkind: [unclosed\n"
    with pytest.raises(DocumentFormatError) as info:
        load_documents(text, source="bad.yaml")
    assert str(info.value).startswith("bad.yaml, document 2: invalid YAML: ")


def test_duplicate_keys_rejected() -> None:
    with pytest.raises(DocumentFormatError, match="found duplicate key 'kind'"):
        load_documents("kind: Tier\nkind: Profile\n")


def test_timestamps_stay_strings() -> None:
    text = GNP.format(name="a") + "  creationTimestamp: 2024-01-02T03:04:05Z\n"
    (res,) = load_documents(text)
    assert res.metadata.creation_timestamp == "2024-01-02T03:04:05Z"
    assert "creationTimestamp: '2024-01-02T03:04:05Z'" in dump_resources([res])


def test_load_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(DocumentFormatError, match=r"missing\.yaml: cannot read file"):
        load_file(tmp_path / "missing.yaml")
    bad = tmp_path / "bin.yaml"
    bad.write_bytes(b"\xff\xfe\x00kind")
    with pytest.raises(DocumentFormatError, match=r"bin\.yaml: not valid UTF-8"):
        load_file(bad)


def test_dump_shapes() -> None:
    a, b = load_documents(GNP.format(name="a") + "---\n" + GNP.format(name="b"))
    single = dump_resources([a])
    assert single.startswith("apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\n")
    several = yaml.safe_load(dump_resources([a, b]))
    assert [d["metadata"]["name"] for d in several] == ["a", "b"]
    as_json = json.loads(dump_resources([a], "json"))
    assert list(as_json) == ["kind", "apiVersion", "metadata", "spec"]
    listed = yaml.safe_load(
        dump_resources([a, b], as_list=True, list_metadata={"resourceVersion": "7"})
    )
    assert listed["kind"] == "GlobalNetworkPolicyList"
    assert listed["metadata"] == {"resourceVersion": "7"}
    assert load_documents(dump_resources([a, b], as_list=True)) == [a, b]
    assert load_documents(dump_resources([a, b], "json")) == [a, b]
    with pytest.raises(ValueError, match="unrecognized output format 'xml'"):
        dump_resources([a], "xml")  # type: ignore[arg-type]


def test_with_default_namespace() -> None:
    resources = load_documents(NS.format(name="n") + "---\n" + GNP.format(name="g"))
    filled = with_default_namespace(resources)
    assert [r.metadata.namespace for r in filled] == ["default", None]
    assert resources[0].metadata.namespace is None  # originals untouched
    assert with_default_namespace(filled, "other")[0].metadata.namespace == "default"


def test_format_loc() -> None:
    assert (
        format_loc(("spec", "ingress", 0, "source", "nets", 2)) == "spec.ingress[0].source.nets[2]"
    )
    assert format_loc(("metadata", "labels", "a/b", "[key]")) == "metadata.labels[a/b]"


# --- Property tests.

NAMES = st.from_regex(r"[a-z]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
SELECTORS = st.sampled_from(
    [
        "",
        "all()",
        "role == 'db'",
        "has(app) && tier in {'a', 'b'}",
        "!has(x)",
        "a != 'b' || c == 'd'",
    ]
)
V4_NETS = st.builds(
    lambda ip, plen: str(__import__("ipaddress").ip_network(f"{ip}/{plen}", strict=False)),
    st.ip_addresses(v=4),
    st.integers(0, 32),
)
PORTS = st.one_of(
    st.integers(1, 65535),
    st.tuples(st.integers(1, 65535), st.integers(1, 65535)).map(
        lambda t: f"{min(t)}:{max(t)}" if t[0] != t[1] else t[0]
    ),
    st.from_regex(r"[a-z]{1,12}", fullmatch=True),
)


@st.composite
def entity_rules(draw: st.DrawFn, with_ports: bool) -> dict[str, Any]:
    ent: dict[str, Any] = {}
    if draw(st.booleans()):
        ent["nets"] = draw(st.lists(V4_NETS, max_size=3))
    if draw(st.booleans()):
        ent["notNets"] = draw(st.lists(V4_NETS, max_size=2))
    for key in ("selector", "notSelector", "namespaceSelector"):
        if draw(st.booleans()):
            ent[key] = draw(SELECTORS)
    if with_ports and draw(st.booleans()):
        ent["ports"] = draw(st.lists(PORTS, max_size=4))
    if with_ports and draw(st.booleans()):
        ent["notPorts"] = draw(st.lists(PORTS, max_size=2))
    return ent


@st.composite
def rules(draw: st.DrawFn) -> dict[str, Any]:
    protocol = draw(st.sampled_from([None, "TCP", "UDP", "SCTP", 6, 17, "ICMP", "UDPLite", 99]))
    rule: dict[str, Any] = {"action": draw(st.sampled_from(["Allow", "Deny", "Log", "Pass"]))}
    if protocol is not None:
        rule["protocol"] = protocol
    if draw(st.booleans()):
        rule["ipVersion"] = 4
    if protocol == "ICMP" and draw(st.booleans()):
        rule["icmp"] = {"type": draw(st.integers(0, 254)), "code": draw(st.integers(0, 255))}
    ports_ok = protocol in ("TCP", "UDP", "SCTP", 6, 17)
    for side in ("source", "destination"):
        if draw(st.booleans()):
            rule[side] = draw(entity_rules(ports_ok))
    return rule


@st.composite
def policies(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["NetworkPolicy", "GlobalNetworkPolicy", "StagedNetworkPolicy"]))
    spec: dict[str, Any] = {
        "ingress": draw(st.lists(rules(), max_size=3)),
        "egress": draw(st.lists(rules(), max_size=3)),
        "selector": draw(SELECTORS),
    }
    if draw(st.booleans()):
        spec["order"] = draw(
            st.one_of(st.integers(-1000, 10**6), st.floats(allow_nan=False, allow_infinity=False))
        )
    if draw(st.booleans()):
        spec["tier"] = draw(NAMES)
    meta: dict[str, Any] = {
        "name": draw(NAMES),
        "labels": draw(st.dictionaries(NAMES, NAMES, max_size=3)),
    }
    if kind != "GlobalNetworkPolicy":
        meta["namespace"] = draw(NAMES)
    return {"apiVersion": "projectcalico.org/v3", "kind": kind, "metadata": meta, "spec": spec}


@st.composite
def endpoint_docs(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(NAMES)
    choice = draw(
        st.sampled_from(["HostEndpoint", "GlobalNetworkSet", "Profile", "WorkloadEndpoint"])
    )
    if choice == "HostEndpoint":
        spec: dict[str, Any] = {
            "node": draw(NAMES),
            "expectedIPs": [
                str(ip) for ip in draw(st.lists(st.ip_addresses(), min_size=1, max_size=3))
            ],
            "ports": [
                {
                    "name": draw(st.from_regex(r"[a-z]{1,10}", fullmatch=True)),
                    "protocol": "TCP",
                    "port": p,
                }
                for p in draw(st.lists(st.integers(1, 65535), max_size=2))
            ],
        }
        meta: dict[str, Any] = {"name": name}
    elif choice == "GlobalNetworkSet":
        spec = {"nets": draw(st.lists(V4_NETS, max_size=4))}
        meta = {"name": name}
    elif choice == "Profile":
        spec = {
            "ingress": draw(st.lists(rules(), max_size=2)),
            "labelsToApply": draw(st.dictionaries(NAMES, NAMES, max_size=2)),
        }
        meta = {"name": name}
    else:
        ips = draw(st.lists(st.ip_addresses(v=4), max_size=2))
        spec = {
            "interfaceName": "cali" + name[:8],
            "ipNetworks": [f"{ip}/32" for ip in ips],
            "node": draw(NAMES),
        }
        meta = {"name": name, "namespace": draw(NAMES)}
    return {"apiVersion": "projectcalico.org/v3", "kind": choice, "metadata": meta, "spec": spec}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.one_of(policies(), endpoint_docs()), min_size=1, max_size=3),
    st.sampled_from(["yaml", "json"]),
)
def test_round_trip_is_lossless(docs: list[dict[str, Any]], fmt: str) -> None:
    text = "---\n".join(yaml.safe_dump(d) for d in docs)
    loaded = load_documents(text)
    dumped = dump_resources(loaded, fmt)  # type: ignore[arg-type]
    again = load_documents(dumped)
    assert again == loaded
    assert dump_resources(again, fmt) == dumped  # type: ignore[arg-type]


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
FUZZ_KINDS = [
    "NetworkPolicy",
    "GlobalNetworkPolicy",
    "StagedKubernetesNetworkPolicy",
    "Tier",
    "Profile",
    "HostEndpoint",
    "WorkloadEndpoint",
    "NetworkSet",
    "List",
    "GlobalNetworkSetList",
]


def _only_api_errors(text: str) -> None:
    with contextlib.suppress(APIError):
        load_documents(text, source="fuzz")


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_random_text_raises_only_api_errors(text: str) -> None:
    _only_api_errors(text)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(FUZZ_KINDS), JSONISH, JSONISH, st.booleans())
def test_random_structures_raise_only_api_errors(
    kind: str, meta: Any, spec: Any, as_json: bool
) -> None:
    doc = {
        "apiVersion": "projectcalico.org/v3",
        "kind": kind,
        "metadata": meta,
        "spec": spec,
        "items": [spec],
    }
    text = json.dumps(doc) if as_json else yaml.safe_dump(doc)
    _only_api_errors(text)


@settings(max_examples=100, deadline=None)
@given(
    policies(),
    st.lists(
        st.tuples(
            st.integers(0, 10_000),
            st.sampled_from(["", ":", "-", "[", "{", "'", "\n  ", "0", "x", "&a", "*a", "!!"]),
        ),
        max_size=5,
    ),
)
def test_mutated_documents_raise_only_api_errors(
    doc: dict[str, Any], edits: list[tuple[int, str]]
) -> None:
    text = yaml.safe_dump(doc)
    for pos, insert in edits:
        pos %= len(text) + 1
        text = text[:pos] + insert + text[pos + 1 :]
    _only_api_errors(text)
