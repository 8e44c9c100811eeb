"""The Typha wire protocol: framing, every message type, compression, typed KV round trips."""

from __future__ import annotations

import socket
import struct
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calico.model import GlobalConfigKey, ProfileRulesKey, ResourceKey, WorkloadEndpointKey
from calico.model.values import decode_value
from calico.syncer.api import SyncStatus, Update, UpdateType
from calico.syncer.typhaclient import framing
from calico.syncer.typhaclient import messages as m
from calico.syncer.typhaclient.kvs import from_serialized, to_serialized

TEXT = st.text(max_size=12)
KV = st.builds(
    m.SerializedUpdate,
    key=TEXT,
    value=st.none()
    | st.recursive(
        st.none() | st.booleans() | st.integers(-(2**40), 2**40) | TEXT,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
        max_leaves=8,
    ),
    revision=TEXT,
    v3_resource_version=TEXT,
    ttl=st.none() | st.floats(0, 1e6),
    update_type=st.sampled_from(list(UpdateType)),
)
MESSAGES = st.one_of(
    st.builds(
        m.ClientHello,
        hostname=TEXT,
        info=TEXT,
        version=TEXT,
        syncer_type=TEXT,
        supports_decoder_restart=st.booleans(),
        supported_compression_algorithms=st.lists(TEXT, max_size=3).map(tuple),
        supports_modern_policy_keys=st.booleans(),
        client_conn_id=st.integers(0, 2**64 - 1),
    ),
    st.builds(
        m.ServerHello,
        version=TEXT,
        syncer_type=TEXT,
        supports_node_resource_updates=st.booleans(),
        server_conn_id=st.integers(0, 2**64 - 1),
    ),
    st.builds(m.DecoderRestart, message=TEXT, compression_algorithm=TEXT),
    st.just(m.Ack()),
    st.builds(m.SyncStatusMsg, status=st.sampled_from(list(SyncStatus))),
    st.builds(m.Ping, timestamp=st.floats(0, 2e9)),
    st.builds(m.Pong, ping_timestamp=st.floats(0, 2e9), pong_timestamp=st.floats(0, 2e9)),
    st.builds(m.KVs, kvs=st.lists(KV, max_size=5).map(tuple)),
)


@settings(max_examples=300)
@given(MESSAGES, st.booleans())
def test_every_message_round_trips_through_a_frame(msg: m.Message, compressed: bool) -> None:
    data = framing.frame_message(msg, compressed)
    (length,) = struct.unpack(">I", data[:4])
    assert length == len(data) - 4
    assert framing.decode_payload(data[4:], compressed) == msg


@given(st.lists(KV, max_size=40))
def test_kvs_payload_from_prepacked_kvs_equals_the_plain_encoding(kvs: list[Any]) -> None:
    payload = m.kvs_payload([m.pack_kv(kv) for kv in kvs])
    assert payload == m.encode(m.KVs(tuple(kvs)))
    assert m.decode(payload) == m.KVs(tuple(kvs))


def test_kvs_payload_array_headers_at_the_size_boundaries() -> None:
    kv = m.SerializedUpdate("/k", None, "1", "", None, UpdateType.DELETED)
    for n in (0, 15, 16, 65535, 65536):
        assert m.decode(m.kvs_payload([m.pack_kv(kv)] * n)) == m.KVs((kv,) * n)


def test_wire_enums_are_upstreams_integers() -> None:
    assert [m.STATUS_TO_WIRE[s] for s in SyncStatus] == [0, 1, 2]
    assert m.UPDATE_TYPE_TO_WIRE == {
        UpdateType.UNKNOWN: 0,
        UpdateType.NEW: 1,
        UpdateType.UPDATED: 2,
        UpdateType.DELETED: 3,
    }
    assert msgpack.unpackb(m.encode(m.SyncStatusMsg(SyncStatus.IN_SYNC))) == [
        "SyncStatus",
        {"status": 2},
    ]


def test_unknown_fields_are_ignored_and_missing_ones_default() -> None:
    payload = msgpack.packb(["ClientHello", {"hostname": "h", "someFutureFlag": True}])
    assert m.decode(payload) == m.ClientHello(hostname="h")
    assert m.decode(msgpack.packb(["ACK", {}])) == m.Ack()


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        (b"\xc1", "undecodable message"),
        (b"", "undecodable message"),
        (msgpack.packb({"a": 1}), "not a message envelope"),
        (msgpack.packb(["ClientHello"]), "not a message envelope"),
        (msgpack.packb(["Nope", {}]), "unknown message type 'Nope'"),
        (msgpack.packb([7, {}]), "unknown message type 7"),
        (msgpack.packb(["ClientHello", {"hostname": 5}]), "ClientHello.hostname: expected str"),
        (
            msgpack.packb(["ClientHello", {"supports_decoder_restart": 1}]),
            "expected bool",
        ),
        (
            msgpack.packb(["ClientHello", {"client_conn_id": True}]),
            "ClientHello.client_conn_id: expected int",
        ),
        (
            msgpack.packb(["ClientHello", {"supported_compression_algorithms": [1]}]),
            "expected tuple",
        ),
        (msgpack.packb(["SyncStatus", {"status": 3}]), "unknown sync status 3"),
        (msgpack.packb(["SyncStatus", {"status": True}]), "unknown sync status True"),
        (msgpack.packb(["KVs", {"kvs": 1}]), "KVs.kvs is not a list"),
        (msgpack.packb(["KVs", {"kvs": [["/k", None, "", ""]]}]), "malformed KV"),
        (msgpack.packb(["KVs", {"kvs": [[1, None, "", "", None, 1]]}]), "malformed KV"),
        (msgpack.packb(["KVs", {"kvs": [["/k", None, "", "", "x", 1]]}]), "malformed KV TTL"),
        (msgpack.packb(["KVs", {"kvs": [["/k", None, "", "", None, 9]]}]), "unknown update type"),
    ],
)
def test_malformed_messages_are_protocol_errors(payload: bytes, error: str) -> None:
    with pytest.raises(m.ProtocolError, match=error.replace("(", r"\(").replace("[", r"\[")):
        m.decode(payload)


def test_garbage_compressed_frame_is_a_protocol_error() -> None:
    with pytest.raises(m.ProtocolError, match="undecodable compressed frame"):
        framing.decode_payload(b"\xff\xff\xff\xff\x00", compressed=True)


def test_frame_length_cap_is_inclusive() -> None:
    assert framing.check_length(struct.pack(">I", 1 << 20), 1 << 20) == 1 << 20
    with pytest.raises(framing.FrameTooLargeError, match="1048577 bytes exceeds the 1048576"):
        framing.check_length(struct.pack(">I", (1 << 20) + 1), 1 << 20)


def test_compression_actually_compresses_and_is_per_frame() -> None:
    msg = m.KVs(tuple(m.SerializedUpdate(f"/calico/v1/config/k{i}", "x" * 50) for i in range(50)))
    plain, packed = framing.frame_message(msg), framing.frame_message(msg, compressed=True)
    assert len(packed) < len(plain) / 3
    assert framing.decode_payload(packed[4:], True) == msg
    with pytest.raises(m.ProtocolError):
        framing.decode_payload(packed[4:], False)


def test_socket_reader_reads_frames_split_across_sends_and_enforces_its_cap() -> None:
    a, b = socket.socketpair()
    with a, b:
        data = framing.frame_message(m.Ping(1.0)) + framing.frame_message(m.Ack())
        for i in range(len(data)):  # byte by byte
            a.send(data[i : i + 1])
        reader = framing.SocketFrameReader(b)
        assert reader.read() == m.Ping(1.0)
        assert reader.read() == m.Ack()
        a.send(struct.pack(">I", 101))
        with pytest.raises(framing.FrameTooLargeError):
            framing.SocketFrameReader(b, cap=100).read()
        a.close()
        with pytest.raises(ConnectionError, match="closed by peer"):
            reader.read()


# -- typed KVs ---------------------------------------------------------------------------------

NODE_JSON = {
    "kind": "Node",
    "apiVersion": "projectcalico.org/v3",
    "metadata": {"name": "n1", "resourceVersion": "42"},
    "spec": {"bgp": {"ipv4Address": "10.0.0.1/24"}},
}
RULES_JSON = {"inbound_rules": [{"action": "allow", "protocol": "tcp"}], "outbound_rules": []}
WEP_KEY = WorkloadEndpointKey("h1", "k8s", "ns/pod", "eth0")
WEP_JSON = {
    "state": "active",
    "name": "cali1234",
    "mac": "ee:ee:ee:ee:ee:ee",
    "profile_ids": ["kns.ns"],
    "ipv4_nets": ["10.65.0.2/32"],
    "ipv6_nets": [],
}


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        (GlobalConfigKey("LogSeverityScreen"), "Debug"),
        (ProfileRulesKey("kns.ns"), RULES_JSON),
        (WEP_KEY, WEP_JSON),
        (ResourceKey("Node", "n1"), NODE_JSON),
    ],
)
def test_typed_updates_round_trip_through_the_model_codec(key: Any, raw: Any) -> None:
    value = decode_value(key, raw)
    update = Update(key, value, "17", UpdateType.UPDATED, None)
    kv = to_serialized(update)
    assert kv.key == key.default_path()
    wire = m.decode(m.encode(m.KVs((kv,)))).kvs[0]  # type: ignore[attr-defined]
    assert from_serialized(wire) == update


def test_resource_version_travels_beside_the_value() -> None:
    key = ResourceKey("Node", "n1")
    a = to_serialized(Update(key, decode_value(key, NODE_JSON), "1", UpdateType.NEW))
    other = {**NODE_JSON, "metadata": {"name": "n1", "resourceVersion": "43"}}
    b = to_serialized(Update(key, decode_value(key, other), "2", UpdateType.UPDATED))
    assert (a.v3_resource_version, b.v3_resource_version) == ("42", "43")
    assert a.value == b.value and "resourceVersion" not in a.value["metadata"]


def test_delete_and_unparseable_key_and_bad_value() -> None:
    key = GlobalConfigKey("X")
    kv = to_serialized(Update(key, None, "5", UpdateType.DELETED))
    assert kv.value is None and kv.update_type is UpdateType.DELETED
    assert from_serialized(kv) == Update(key, None, "5", UpdateType.DELETED)
    assert from_serialized(m.SerializedUpdate("/not/a/calico/key", "x")) is None
    bad = from_serialized(m.SerializedUpdate(ProfileRulesKey("p").default_path(), "not rules"))
    assert bad is not None and bad.value is None and bad.update_type is UpdateType.DELETED
