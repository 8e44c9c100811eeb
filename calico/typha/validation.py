"""Typha's validation step: each update is checked and serialised exactly once.

The syncer's processors already produce typed, validated values; what is left to catch is a
value its key cannot carry (the model codec refuses it) and a workload endpoint without a name.
Either becomes a deletion, logged "Validation failed; treating as missing", as upstream's
validation filter does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import msgpack

from calico.model.values import WorkloadEndpoint
from calico.syncer.api import Update, UpdateType
from calico.syncer.typhaclient.kvs import to_serialized
from calico.syncer.typhaclient.messages import UPDATE_TYPE_TO_WIRE, SerializedUpdate

log = logging.getLogger(__name__)

_NEW = bytes([UPDATE_TYPE_TO_WIRE[UpdateType.NEW]])


@dataclass(frozen=True, slots=True)
class Entry:
    """One serialised update. ``value_bytes`` (the packed value alone) is what the no-op check
    compares; ``body`` is the packed KV without its final update-type byte, so the snapshot
    form (type NEW) and the delta form share it."""

    path: str
    value_bytes: bytes | None
    body: bytes
    update_type: int

    @property
    def delta(self) -> bytes:
        return self.body + bytes([self.update_type])

    @property
    def snapshot(self) -> bytes:
        return self.body + _NEW

    @property
    def is_delete(self) -> bool:
        return self.value_bytes is None


def _pack(kv: SerializedUpdate) -> Entry:
    wire = kv.to_wire()
    value_bytes = None if kv.value is None else msgpack.packb(kv.value, use_bin_type=True)
    body = b"".join(
        (
            b"\x96",
            msgpack.packb(wire[0]),
            value_bytes if value_bytes is not None else b"\xc0",
            msgpack.packb(wire[2]),
            msgpack.packb(wire[3]),
            msgpack.packb(wire[4]),
        )
    )
    return Entry(kv.key, value_bytes, body, wire[5])


def validate_and_serialize(update: Update) -> Entry:
    value = update.value
    if isinstance(value, WorkloadEndpoint) and not value.name:
        log.warning("Validation failed; treating as missing: %s has no name", update.key)
        update = Update(update.key, None, update.revision, UpdateType.DELETED, update.ttl)
    try:
        kv = to_serialized(update)
    except ValueError as exc:
        log.warning("Validation failed; treating as missing: %s: %s", update.key, exc)
        kv = to_serialized(Update(update.key, None, update.revision, UpdateType.DELETED))
    return _pack(kv)
