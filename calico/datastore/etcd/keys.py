"""Key/value encoding between the Backend protocol's strings and etcd's bytes."""

from __future__ import annotations

from collections.abc import Iterable

from calico.datastore.backend import KVPair
from calico.proto.etcd import kv_pb2


def encode(text: str) -> bytes:
    return text.encode("utf-8")


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def prefix_range(prefix: str) -> tuple[bytes, bytes]:
    """``(key, range_end)`` selecting every key that starts with ``prefix`` (all keys for "")."""
    key = encode(prefix)
    if not key:
        return b"\0", b"\0"
    end = bytearray(key)
    while end and end[-1] == 0xFF:
        end.pop()
    if not end:
        return key, b"\0"
    end[-1] += 1
    return key, bytes(end)


def to_pair(kv: kv_pb2.KeyValue, ttl: float | None = None) -> KVPair:
    return KVPair(decode(kv.key), decode(kv.value), kv.mod_revision, ttl)


def pairs(kvs: Iterable[kv_pb2.KeyValue]) -> list[KVPair]:
    """``to_pair`` for a whole page, inlined, with each key's lease ID (None for none) in the
    ``ttl`` slot for the caller to resolve: a list of 100,000 keys paid more for a Python call
    per key than for etcd's Range (design/performance.md "Datastore listing")."""
    new = tuple.__new__
    return [
        new(
            KVPair,
            (
                kv.key.decode("utf-8", "replace"),
                kv.value.decode("utf-8", "replace"),
                kv.mod_revision,
                kv.lease or None,
            ),
        )
        for kv in kvs
    ]
