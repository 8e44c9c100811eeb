"""The Typha message set (upstream's syncproto messages) and their msgpack encoding.

Each message is one msgpack array ``[type name, {field: value}]``. Fields a receiver does not know
are ignored and missing fields take their default, which gives the feature-negotiation rule of
design/typha.md "Wire protocol": a new flag reads as false at an old peer, and neither side sends a
new message type before the peer's hello advertised it. Timestamps are float seconds since the
epoch; statuses and update types travel as upstream's small integers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgpack

from calico.syncer.api import SyncStatus, UpdateType

COMPRESSION_SNAPPY = "snappy"
DEFAULT_PORT = 5473

#: Wire integers (upstream's enum values).
STATUS_TO_WIRE = {
    SyncStatus.WAIT_FOR_DATASTORE: 0,
    SyncStatus.RESYNC_IN_PROGRESS: 1,
    SyncStatus.IN_SYNC: 2,
}
STATUS_FROM_WIRE = {v: k for k, v in STATUS_TO_WIRE.items()}
UPDATE_TYPE_TO_WIRE = {
    UpdateType.UNKNOWN: 0,
    UpdateType.NEW: 1,
    UpdateType.UPDATED: 2,
    UpdateType.DELETED: 3,
}
UPDATE_TYPE_FROM_WIRE = {v: k for k, v in UPDATE_TYPE_TO_WIRE.items()}


class ProtocolError(ValueError):
    """A frame or message that breaks the protocol: the connection is dropped."""


@dataclass(frozen=True)
class Message:
    NAME: ClassVar[str] = ""

    def fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class ClientHello(Message):
    NAME: ClassVar[str] = "ClientHello"
    hostname: str = ""
    info: str = ""
    version: str = ""
    syncer_type: str = ""  # empty means felix
    supports_decoder_restart: bool = False
    supported_compression_algorithms: tuple[str, ...] = ()
    supports_modern_policy_keys: bool = False
    client_conn_id: int = 0


@dataclass(frozen=True)
class ServerHello(Message):
    NAME: ClassVar[str] = "ServerHello"
    version: str = ""
    syncer_type: str = ""
    supports_node_resource_updates: bool = False
    server_conn_id: int = 0


@dataclass(frozen=True)
class DecoderRestart(Message):
    """Server to client: from the next frame on, decode with ``compression_algorithm``."""

    NAME: ClassVar[str] = "DecoderRestart"
    message: str = ""
    compression_algorithm: str = ""


@dataclass(frozen=True)
class Ack(Message):
    """Client to server: the decoder restart is done (the old format is drained)."""

    NAME: ClassVar[str] = "ACK"


@dataclass(frozen=True)
class SyncStatusMsg(Message):
    NAME: ClassVar[str] = "SyncStatus"
    status: SyncStatus = SyncStatus.WAIT_FOR_DATASTORE

    def fields(self) -> dict[str, Any]:
        return {"status": STATUS_TO_WIRE[self.status]}


@dataclass(frozen=True)
class Ping(Message):
    NAME: ClassVar[str] = "Ping"
    timestamp: float = 0.0


@dataclass(frozen=True)
class Pong(Message):
    NAME: ClassVar[str] = "Pong"
    ping_timestamp: float = 0.0
    pong_timestamp: float = 0.0


@dataclass(frozen=True)
class SerializedUpdate:
    """One KV as it travels: the key's default path, the value's v1 JSON shape (None = delete),
    the revision, a v3 resource's ``resourceVersion`` (moved out of the value so equal values
    pack to equal bytes), the TTL and the update type."""

    key: str
    value: Any
    revision: str = ""
    v3_resource_version: str = ""
    ttl: float | None = None
    update_type: UpdateType = UpdateType.NEW

    def to_wire(self) -> list[Any]:
        return [
            self.key,
            self.value,
            self.revision,
            self.v3_resource_version,
            self.ttl,
            UPDATE_TYPE_TO_WIRE[self.update_type],
        ]

    @classmethod
    def from_wire(cls, raw: Any) -> SerializedUpdate:
        if not isinstance(raw, list) or len(raw) != 6:
            raise ProtocolError(f"malformed KV: {_short(raw)}")
        key, value, revision, v3rv, ttl, ut = raw
        if not isinstance(key, str) or not isinstance(revision, str) or not isinstance(v3rv, str):
            raise ProtocolError(f"malformed KV: {_short(raw)}")
        if ttl is not None and not isinstance(ttl, int | float):
            raise ProtocolError(f"malformed KV TTL: {_short(ttl)}")
        if ut not in UPDATE_TYPE_FROM_WIRE:
            raise ProtocolError(f"unknown update type {ut!r}")
        return cls(key, value, revision, v3rv, ttl, UPDATE_TYPE_FROM_WIRE[ut])


@dataclass(frozen=True)
class KVs(Message):
    """Snapshot chunks and deltas."""

    NAME: ClassVar[str] = "KVs"
    kvs: tuple[SerializedUpdate, ...] = field(default_factory=tuple)

    def fields(self) -> dict[str, Any]:
        return {"kvs": [kv.to_wire() for kv in self.kvs]}


MESSAGE_TYPES: dict[str, type[Message]] = {
    cls.NAME: cls
    for cls in (ClientHello, ServerHello, DecoderRestart, Ack, SyncStatusMsg, Ping, Pong, KVs)
}


def _short(raw: Any) -> str:
    text = repr(raw)
    return text if len(text) <= 80 else text[:77] + "..."


def encode(msg: Message) -> bytes:
    """A message as one msgpack payload (framing is the caller's: see ``framing``)."""
    return msgpack.packb([msg.NAME, msg.fields()], use_bin_type=True)


#: The first bytes of every KVs payload: ``[`` (2-array), ``"KVs"``, ``{"kvs": `` — so a KVs
#: frame can be assembled from already-packed KVs without unpacking them (see kvs_payload).
_KVS_PREFIX = b"\x92" + msgpack.packb("KVs") + b"\x81" + msgpack.packb("kvs")


def _array_header(n: int) -> bytes:
    if n < 16:
        return bytes([0x90 | n])
    if n < 0x10000:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def kvs_payload(packed_kvs: list[bytes]) -> bytes:
    """A KVs message payload from KVs each packed once (``pack_kv``): the shared fast path."""
    return b"".join((_KVS_PREFIX, _array_header(len(packed_kvs)), *packed_kvs))


def pack_kv(kv: SerializedUpdate) -> bytes:
    return msgpack.packb(kv.to_wire(), use_bin_type=True)


def _check_fields(cls: type[Message], raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in raw:
            continue
        value = raw[f.name]
        want = f.type
        ok = {
            "str": isinstance(value, str),
            "bool": isinstance(value, bool),
            "int": isinstance(value, int) and not isinstance(value, bool),
            "float": isinstance(value, int | float) and not isinstance(value, bool),
            "tuple[str, ...]": isinstance(value, list) and all(isinstance(v, str) for v in value),
        }.get(str(want), True)
        if not ok:
            raise ProtocolError(f"{cls.NAME}.{f.name}: expected {want}, got {_short(value)}")
        out[f.name] = tuple(value) if want == "tuple[str, ...]" else value
    return out


def decode(payload: bytes) -> Message:
    """Parse one payload; ProtocolError for anything that is not a well-formed message."""
    try:
        raw = msgpack.unpackb(payload, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types for garbage
        raise ProtocolError(f"undecodable message: {exc}") from None
    if not (isinstance(raw, list) and len(raw) == 2 and isinstance(raw[1], dict)):
        raise ProtocolError(f"not a message envelope: {_short(raw)}")
    name, body = raw
    cls = MESSAGE_TYPES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ProtocolError(f"unknown message type {_short(name)}")
    if cls is KVs:
        kvs = body.get("kvs", [])
        if not isinstance(kvs, list):
            raise ProtocolError("KVs.kvs is not a list")
        return KVs(tuple(SerializedUpdate.from_wire(kv) for kv in kvs))
    if cls is SyncStatusMsg:
        status = body.get("status", 0)
        if status not in STATUS_FROM_WIRE or isinstance(status, bool):
            raise ProtocolError(f"unknown sync status {_short(status)}")
        return SyncStatusMsg(STATUS_FROM_WIRE[status])
    return cls(**_check_fields(cls, body))
