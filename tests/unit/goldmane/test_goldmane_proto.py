"""Our goldmane .proto against upstream's wire format (field numbers, types, enums, methods).

The table is upstream's goldmane/proto/api.proto reduced to what the wire sees; a renumbered
field or a changed type breaks an upstream client, so every entry is checked both ways. Our
extensions (``EXTENSIONS``, design/goldmane.md "Source IPs and ports") must sit above upstream's
numbers; a client compiled from the upstream table alone must decode our messages, and ours its.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor as F

from calico.proto.goldmane import api_pb2

I64, STR, BOOL, ENUM, MSG = F.TYPE_INT64, F.TYPE_STRING, F.TYPE_BOOL, F.TYPE_ENUM, F.TYPE_MESSAGE
REP = "repeated"

SM = ("StringMatch", MSG)
MESSAGES: dict[str, dict[str, tuple]] = {
    "FlowListRequest": {
        "start_time_gte": (1, I64),
        "start_time_lt": (2, I64),
        "page": (3, I64),
        "page_size": (4, I64),
        "sort_by": (5, MSG, REP, "SortOption"),
        "filter": (6, MSG, None, "Filter"),
        "aggregation_interval": (7, I64),
    },
    "FlowListResult": {
        "meta": (1, MSG, None, "ListMetadata"),
        "flows": (2, MSG, REP, "FlowResult"),
    },
    "FlowStreamRequest": {
        "start_time_gte": (1, I64),
        "filter": (2, MSG, None, "Filter"),
        "aggregation_interval": (3, I64),
    },
    "FilterHintsRequest": {
        "type": (1, ENUM, None, "FilterType"),
        "filter": (2, MSG, None, "Filter"),
        "start_time_gte": (3, I64),
        "start_time_lt": (4, I64),
        "page": (5, I64),
        "page_size": (6, I64),
    },
    "FilterHintsResult": {
        "meta": (1, MSG, None, "ListMetadata"),
        "hints": (2, MSG, REP, "FilterHint"),
    },
    "ListMetadata": {"totalPages": (1, I64), "totalResults": (2, I64)},
    "FilterHint": {"value": (1, STR)},
    "FlowResult": {"id": (1, I64), "flow": (2, MSG, None, "Flow")},
    "Filter": {
        "source_names": (1, MSG, REP, SM[0]),
        "source_namespaces": (2, MSG, REP, SM[0]),
        "dest_names": (3, MSG, REP, SM[0]),
        "dest_namespaces": (4, MSG, REP, SM[0]),
        "protocols": (5, MSG, REP, SM[0]),
        "dest_ports": (6, MSG, REP, "PortMatch"),
        "actions": (7, ENUM, REP, "Action"),
        "policies": (8, MSG, REP, "PolicyMatch"),
        "reporter": (9, ENUM, None, "Reporter"),
        "pending_actions": (10, ENUM, REP, "Action"),
    },
    "StringMatch": {"value": (1, STR), "type": (2, ENUM, None, "MatchType")},
    "PortMatch": {"port": (1, I64)},
    "SortOption": {"sort_by": (1, ENUM, None, "SortBy")},
    "PolicyMatch": {
        "kind": (1, ENUM, None, "PolicyKind"),
        "tier": (2, MSG, None, SM[0]),
        "namespace": (3, MSG, None, SM[0]),
        "name": (4, MSG, None, SM[0]),
        "action": (5, ENUM, None, "Action"),
    },
    "FlowReceipt": {},
    "FlowUpdate": {"flow": (1, MSG, None, "Flow")},
    "FlowKey": {
        "source_name": (1, STR),
        "source_namespace": (2, STR),
        "source_type": (3, ENUM, None, "EndpointType"),
        "dest_name": (4, STR),
        "dest_namespace": (5, STR),
        "dest_type": (6, ENUM, None, "EndpointType"),
        "dest_port": (7, I64),
        "dest_service_name": (8, STR),
        "dest_service_namespace": (9, STR),
        "dest_service_port_name": (10, STR),
        "dest_service_port": (11, I64),
        "proto": (12, STR),
        "reporter": (13, ENUM, None, "Reporter"),
        "action": (14, ENUM, None, "Action"),
        "policies": (15, MSG, None, "PolicyTrace"),
    },
    "Flow": {
        "Key": (1, MSG, None, "FlowKey"),
        "start_time": (2, I64),
        "end_time": (3, I64),
        "source_labels": (4, STR, REP),
        "dest_labels": (5, STR, REP),
        "packets_in": (6, I64),
        "packets_out": (7, I64),
        "bytes_in": (8, I64),
        "bytes_out": (9, I64),
        "num_connections_started": (10, I64),
        "num_connections_completed": (11, I64),
        "num_connections_live": (12, I64),
    },
    "PolicyTrace": {
        "enforced_policies": (1, MSG, REP, "PolicyHit"),
        "pending_policies": (2, MSG, REP, "PolicyHit"),
    },
    "PolicyHit": {
        "kind": (1, ENUM, None, "PolicyKind"),
        "namespace": (2, STR),
        "name": (3, STR),
        "tier": (4, STR),
        "action": (5, ENUM, None, "Action"),
        "policy_index": (6, I64),
        "rule_index": (7, I64),
        "trigger": (8, MSG, None, "PolicyHit"),
    },
    "StatisticsRequest": {
        "start_time_gte": (1, I64),
        "start_time_lt": (2, I64),
        "type": (3, ENUM, None, "StatisticType"),
        "group_by": (4, ENUM, None, "StatisticsGroupBy"),
        "policy_match": (5, MSG, None, "PolicyMatch"),
        "time_series": (6, BOOL),
    },
    "StatisticsResult": {
        "policy": (1, MSG, None, "PolicyHit"),
        "direction": (2, ENUM, None, "RuleDirection"),
        "group_by": (3, ENUM, None, "StatisticsGroupBy"),
        "type": (4, ENUM, None, "StatisticType"),
        **{
            name: (n, I64, REP)
            for n, name in enumerate(
                ["allowed_in", "allowed_out", "denied_in", "denied_out", "passed_in", "passed_out"],
                start=5,
            )
        },
        "x": (11, I64, REP),
    },
}

ENUMS: dict[str, dict[str, int]] = {
    "FilterType": {
        "FilterTypeUnspecified": 0,
        "FilterTypeDestName": 1,
        "FilterTypeSourceName": 2,
        "FilterTypeDestNamespace": 3,
        "FilterTypeSourceNamespace": 4,
        "FilterTypePolicyTier": 5,
        "FilterTypePolicyName": 6,
        "FilterTypePolicyKind": 7,
        "FilterTypePolicyNamespace": 8,
    },
    "Action": {"ActionUnspecified": 0, "Allow": 1, "Deny": 2, "Pass": 3},
    "MatchType": {"Exact": 0, "Fuzzy": 1},
    "PolicyKind": {
        "KindUnspecified": 0,
        "CalicoNetworkPolicy": 1,
        "GlobalNetworkPolicy": 2,
        "StagedNetworkPolicy": 3,
        "StagedGlobalNetworkPolicy": 4,
        "StagedKubernetesNetworkPolicy": 5,
        "NetworkPolicy": 6,
        "Profile": 9,
        "EndOfTier": 10,
        "ClusterNetworkPolicy": 11,
    },
    "SortBy": {
        "Time": 0,
        "DestName": 1,
        "DestNamespace": 2,
        "DestType": 3,
        "SourceName": 4,
        "SourceNamespace": 5,
        "SourceType": 6,
    },
    "EndpointType": {
        "EndpointTypeUnspecified": 0,
        "WorkloadEndpoint": 1,
        "HostEndpoint": 2,
        "NetworkSet": 3,
        "Network": 4,
    },
    "Reporter": {"ReporterUnspecified": 0, "Src": 1, "Dst": 2},
    "StatisticType": {"PacketCount": 0, "ByteCount": 1, "LiveConnectionCount": 2},
    "StatisticsGroupBy": {"Policy": 0, "PolicyRule": 1},
    "RuleDirection": {"Any": 0, "Ingress": 1, "Egress": 2},
}

# (service, method) -> (request, response, client streams, server streams)
METHODS = {
    ("Flows", "List"): ("FlowListRequest", "FlowListResult", False, False),
    ("Flows", "Stream"): ("FlowStreamRequest", "FlowResult", False, True),
    ("Flows", "FilterHints"): ("FilterHintsRequest", "FilterHintsResult", False, False),
    ("FlowCollector", "Connect"): ("FlowUpdate", "FlowReceipt", True, True),
    ("Statistics", "List"): ("StatisticsRequest", "StatisticsResult", False, True),
}


EXTENSIONS: dict[str, dict[str, tuple]] = {
    "FlowKey": {"source_ip": (100, STR)},
    "Flow": {"source_ips": (100, STR, REP), "source_ports": (101, I64, REP)},
}


def upstream_classes() -> dict[str, type]:
    """Message classes compiled from the upstream table alone: an upstream client's view."""
    fdp = descriptor_pb2.FileDescriptorProto(
        name="upstream_goldmane.proto", package="goldmane", syntax="proto3"
    )
    for enum_name, values in ENUMS.items():
        enum = fdp.enum_type.add(name=enum_name)
        for value_name, number in values.items():
            enum.value.add(name=value_name, number=number)
    for msg_name, fields in MESSAGES.items():
        msg = fdp.message_type.add(name=msg_name)
        for field_name, (number, ftype, *rest) in fields.items():
            fd = msg.field.add(name=field_name, number=number, type=ftype)
            fd.label = fd.LABEL_REPEATED if rest and rest[0] == REP else fd.LABEL_OPTIONAL
            if len(rest) > 1:
                fd.type_name = f".goldmane.{rest[1]}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"goldmane.{name}"))
        for name in MESSAGES
    }


def test_package_is_goldmane() -> None:
    assert api_pb2.DESCRIPTOR.package == "goldmane"


def test_exactly_upstreams_messages_with_their_fields() -> None:
    assert set(api_pb2.DESCRIPTOR.message_types_by_name) == set(MESSAGES)
    for msg_name, fields in MESSAGES.items():
        desc = api_pb2.DESCRIPTOR.message_types_by_name[msg_name]
        ours = EXTENSIONS.get(msg_name, {})
        assert set(desc.fields_by_name) == set(fields) | set(ours), msg_name
        if ours:  # clear of upstream's range, with room for upstream to grow
            assert min(spec[0] for spec in ours.values()) >= 100
            assert max(spec[0] for spec in fields.values()) < 100
        for field_name, spec in {**fields, **ours}.items():
            number, ftype, *rest = spec
            label = rest[0] if rest else None
            fd = desc.fields_by_name[field_name]
            where = f"{msg_name}.{field_name}"
            assert fd.number == number, where
            assert fd.type == ftype, where
            assert fd.is_repeated == (label == REP), where
            if len(rest) > 1:
                target = fd.message_type if ftype == MSG else fd.enum_type
                assert target.full_name == f"goldmane.{rest[1]}", where


def test_exactly_upstreams_enums_and_values() -> None:
    assert set(api_pb2.DESCRIPTOR.enum_types_by_name) == set(ENUMS)
    for enum_name, values in ENUMS.items():
        desc = api_pb2.DESCRIPTOR.enum_types_by_name[enum_name]
        assert {v.name: v.number for v in desc.values} == values, enum_name


def test_exactly_upstreams_services_and_methods() -> None:
    services = api_pb2.DESCRIPTOR.services_by_name
    assert set(services) == {"Flows", "FlowCollector", "Statistics"}
    seen = {(s, m.name) for s, sd in services.items() for m in sd.methods}
    assert seen == set(METHODS)
    for (svc, meth), (req, resp, cs, ss) in METHODS.items():
        md = services[svc].methods_by_name[meth]
        assert md.full_name == f"goldmane.{svc}.{meth}"
        assert md.input_type.full_name == f"goldmane.{req}"
        assert md.output_type.full_name == f"goldmane.{resp}"
        assert (md.client_streaming, md.server_streaming) == (cs, ss)


def test_bytes_from_an_upstream_encoder_decode_here() -> None:
    # FlowKey{dest_port=7: 8080, proto=12: "tcp", action=14: Deny(2)}, hand-encoded.
    raw = bytes([0x38, 0x90, 0x3F, 0x62, 3]) + b"tcp" + bytes([0x70, 2])
    key = api_pb2.FlowKey.FromString(raw)
    assert (key.dest_port, key.proto, key.action) == (8080, "tcp", api_pb2.Deny)
    assert key.SerializeToString() == raw


def _our_flow() -> api_pb2.Flow:
    key = api_pb2.FlowKey(
        source_name="pub",
        source_type=api_pb2.Network,
        dest_name="server",
        dest_namespace="ns1",
        dest_port=8080,
        proto="tcp",
        reporter=api_pb2.Dst,
        action=api_pb2.Deny,
        source_ip="198.51.100.7",
    )
    key.policies.enforced_policies.add(kind=api_pb2.CalicoNetworkPolicy, name="p", rule_index=1)
    return api_pb2.Flow(
        Key=key,
        start_time=15,
        end_time=30,
        source_labels=["app=x"],
        packets_in=3,
        source_ips=["198.51.100.7"],
        source_ports=[40000, 40001],
    )


def test_an_upstream_client_decodes_our_messages_and_keeps_the_extensions() -> None:
    up = upstream_classes()
    ours = _our_flow()
    theirs = up["Flow"].FromString(ours.SerializeToString())
    assert (theirs.Key.source_name, theirs.Key.dest_port, theirs.Key.action) == (
        "pub",
        8080,
        api_pb2.Deny,
    )
    assert (theirs.packets_in, list(theirs.source_labels), theirs.end_time) == (3, ["app=x"], 30)
    assert theirs.Key.policies.enforced_policies[0].rule_index == 1
    assert not hasattr(theirs, "source_ips") and not hasattr(theirs.Key, "source_ip")
    # Unknown to upstream, the extensions ride along as unknown fields: a proxy that decodes
    # and re-encodes (e.g. a relay built from upstream's proto) passes them on intact.
    assert api_pb2.Flow.FromString(theirs.SerializeToString()) == ours
    wrapped = up["FlowResult"](id=7, flow=theirs)
    assert api_pb2.FlowResult.FromString(wrapped.SerializeToString()).flow == ours


def test_our_server_decodes_an_upstream_clients_messages() -> None:
    up = upstream_classes()
    theirs = up["FlowUpdate"](flow=up["Flow"](Key=up["FlowKey"](dest_port=443, proto="udp")))
    ours = api_pb2.FlowUpdate.FromString(theirs.SerializeToString())
    assert (ours.flow.Key.dest_port, ours.flow.Key.proto, ours.flow.Key.source_ip) == (
        443,
        "udp",
        "",
    )
    assert (list(ours.flow.source_ips), list(ours.flow.source_ports)) == ([], [])
