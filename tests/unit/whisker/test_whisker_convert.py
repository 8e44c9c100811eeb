"""whisker-backend's REST <-> proto conversion: property tests over upstream's JSON shapes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import given
from hypothesis import strategies as st

from calico.goldmane.convert import flow_from_proto, flow_to_proto
from calico.goldmane.emitter import go_json
from calico.proto.goldmane import api_pb2 as pb
from calico.whisker import convert
from calico.whisker.convert import RequestError

text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
names = st.one_of(text, st.sampled_from(["pub", "pvt", "PUBLIC NETWORK", "PRIVATE NETWORK"]))
match = st.fixed_dictionaries({"value": names, "type": st.sampled_from(["Exact", "Fuzzy"])})
actions = st.lists(st.sampled_from(["Allow", "Deny", "Pass"]), max_size=3)
policy = st.fixed_dictionaries(
    {},
    optional={
        "kind": st.sampled_from(["CalicoNetworkPolicy", "EndOfTier", "Profile"]),
        "tier": match,
        "name": match,
        "namespace": match,
        "action": st.sampled_from(["Allow", "Deny", "Pass"]),
    },
)
filters = st.fixed_dictionaries(
    {},
    optional={
        "source_names": st.lists(match, max_size=3),
        "dest_names": st.lists(match, max_size=3),
        "source_namespaces": st.lists(match, max_size=3),
        "dest_namespaces": st.lists(match, max_size=3),
        "protocols": st.lists(match, max_size=2),
        "dest_ports": st.lists(st.fixed_dictionaries({"value": st.integers(0, 65535)}), max_size=3),
        "actions": actions,
        "pending_actions": actions,
        "policies": st.lists(policy, max_size=2),
        "reporter": st.sampled_from(["Src", "Dst"]),
    },
)
STORED = {"PUBLIC NETWORK": "pub", "PRIVATE NETWORK": "pvt"}


def _matches(got: Any, want: list[dict[str, Any]], field: str) -> None:
    expect = []
    for m in want:
        value = m["value"]
        if field.endswith("_names"):
            value = STORED.get(value, value)
        elif field.endswith("_namespaces") and value == "Global":
            value = "-"
        expect.append((value, m["type"]))
    assert [(g.value, pb.MatchType.Name(g.type)) for g in got] == expect


@given(filters)
def test_every_filter_field_reaches_the_proto(raw: dict[str, Any]) -> None:
    out = convert.parse_filter(json.dumps(raw))
    for field in ("source_names", "dest_names", "source_namespaces", "dest_namespaces"):
        _matches(getattr(out, field), raw.get(field, []), field)
    _matches(out.protocols, raw.get("protocols", []), "protocols")
    assert [p.port for p in out.dest_ports] == [p["value"] for p in raw.get("dest_ports", [])]
    for field in ("actions", "pending_actions"):
        assert [pb.Action.Name(a) for a in getattr(out, field)] == raw.get(field, [])
    assert pb.Reporter.Name(out.reporter) == raw.get("reporter", "ReporterUnspecified")
    for got, want in zip(out.policies, raw.get("policies", []), strict=True):
        assert pb.PolicyKind.Name(got.kind) == want.get("kind", "KindUnspecified")
        assert pb.Action.Name(got.action) == want.get("action", "ActionUnspecified")
        for part in ("tier", "name", "namespace"):
            m = getattr(got, part)
            if part in want:
                assert (m.value, pb.MatchType.Name(m.type)) == (
                    want[part]["value"],
                    want[part]["type"],
                )
            else:
                assert not want.get(part) and m.value == ""


@given(st.integers(-(2**40), 2**40))
def test_times_are_unix_seconds_or_rfc3339(t: int) -> None:
    assert convert.parse_time(str(t), "x") == t
    if 0 <= t < 253_402_300_800:  # RFC 3339 years end at 9999
        stamp = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert convert.parse_time(stamp, "x") == t


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2026-12-01T10:00:00", "needs a zone offset"),
        ("soon", "expected unix seconds or RFC 3339"),
        ("1.5", "expected unix seconds or RFC 3339"),
    ],
)
def test_bad_times_name_the_parameter(value: str, message: str) -> None:
    with pytest.raises(RequestError, match=f"^startTimeGte: .*{message}"):
        convert.parse_time(value, "startTimeGte")


hits = st.builds(
    pb.PolicyHit,
    kind=st.sampled_from(list(pb.PolicyKind.values())),
    namespace=text,
    name=text,
    tier=text,
    action=st.sampled_from(list(pb.Action.values())),
    policy_index=st.integers(-1, 2**31),
    rule_index=st.integers(-1, 2**31),
)
flows = st.builds(
    pb.Flow,
    Key=st.builds(
        pb.FlowKey,
        source_name=names,
        source_namespace=text,
        dest_name=names,
        dest_namespace=text,
        dest_port=st.integers(0, 65535),
        proto=st.sampled_from(["tcp", "udp", ""]),
        reporter=st.sampled_from(list(pb.Reporter.values())),
        action=st.sampled_from(list(pb.Action.values())),
        policies=st.builds(
            pb.PolicyTrace,
            enforced_policies=st.lists(hits, max_size=3),
            pending_policies=st.lists(hits, max_size=2),
        ),
        source_ip=st.sampled_from(["", "198.51.100.7", "2001:db8::1"]),
    ),
    start_time=st.integers(0, 2**33),
    end_time=st.integers(0, 2**33),
    source_labels=st.lists(text, max_size=3),
    dest_labels=st.lists(text, max_size=3),
    packets_in=st.integers(0, 2**62),
    bytes_out=st.integers(0, 2**62),
    source_ips=st.lists(st.sampled_from(["10.0.0.1", "10.0.0.2", "fd00::1"]), max_size=3),
    source_ports=st.lists(st.integers(0, 65535), max_size=4),
)


@given(flows)
def test_flow_response_carries_every_field(flow: pb.Flow) -> None:
    out = convert.flow_json(flow)
    assert convert.parse_time(out["start_time"], "t") == flow.start_time
    assert convert.parse_time(out["end_time"], "t") == flow.end_time
    assert out["source_labels"] == " | ".join(flow.source_labels)
    assert out["source_name"] == convert.display_name(flow.Key.source_name)
    assert out["action"] == pb.Action.Name(flow.Key.action)
    assert (out["packets_in"], out["bytes_out"]) == (flow.packets_in, flow.bytes_out)
    assert out["source_ip"] == flow.Key.source_ip
    assert (out["source_ips"], out["source_ports"]) == (
        list(flow.source_ips),
        list(flow.source_ports),
    )
    enforced = out["policies"]["enforced"]
    assert [h["rule_index"] for h in enforced] == [
        h.rule_index for h in flow.Key.policies.enforced_policies
    ]
    assert all(h["trigger"] is None for h in enforced)
    json.dumps(out)  # serialisable as is


@given(flows)
def test_emitter_json_round_trips_through_the_proto(flow: pb.Flow) -> None:
    engine = flow_to_proto(flow_from_proto(flow))  # what the emitter sends: engine flows
    line = json.dumps(go_json(engine))
    assert json_format.ParseDict(json.loads(line), pb.Flow()) == engine
