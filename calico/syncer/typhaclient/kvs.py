"""Typed updates <-> wire KVs, through the model's codecs only.

A key travels as its default path (``Key.default_path`` / ``key_from_default_path``), a value as
its v1 JSON shape (``calico.model.values.encode_value`` / ``decode_value``). A v3 resource's
``metadata.resourceVersion`` is carried beside the value, so two updates that differ only in
revision pack to the same value bytes (Typha's no-op check compares those).
"""

from __future__ import annotations

import logging
from typing import Any

from calico.model import ResourceKey
from calico.model.paths import key_from_default_path
from calico.model.values import decode_value, encode_value
from calico.syncer.api import Update, UpdateType
from calico.syncer.typhaclient.messages import SerializedUpdate

log = logging.getLogger(__name__)


def to_serialized(update: Update) -> SerializedUpdate:
    """Encode one typed update; raises ``ValueError`` (ValueJSONError) for a value its key
    cannot carry (the server's validation step turns that into a deletion)."""
    value = encode_value(update.key, update.value)
    v3rv = ""
    if isinstance(update.key, ResourceKey) and isinstance(value, dict):
        meta = value.get("metadata")
        if isinstance(meta, dict) and "resourceVersion" in meta:
            meta = dict(meta)
            v3rv = str(meta.pop("resourceVersion") or "")
            value = {**value, "metadata": meta}
    return SerializedUpdate(
        update.key.default_path(),
        value,
        update.revision,
        v3rv,
        update.ttl,
        UpdateType.DELETED if value is None else update.update_type,
    )


def from_serialized(kv: SerializedUpdate) -> Update | None:
    """Decode one KV; None (and a warning) for a key path the model does not know. A value
    that fails to decode becomes a deletion, as upstream's ``ToUpdate`` does."""
    key = key_from_default_path(kv.key)
    if key is None:
        log.warning("Skipping KV with unparseable key %r", kv.key)
        return None
    value: Any = kv.value
    rv = kv.v3_resource_version
    meta = value.get("metadata") if isinstance(value, dict) else None
    if rv and isinstance(key, ResourceKey) and isinstance(meta, dict):
        value = {**value, "metadata": {**meta, "resourceVersion": rv}}
    try:
        typed = decode_value(key, value)
    except ValueError as exc:
        log.warning("Failed to decode value for %s, treating as deleted: %s", kv.key, exc)
        typed = None
    update_type = kv.update_type
    if typed is None:
        update_type = UpdateType.DELETED
    return Update(key, typed, kv.revision, update_type, kv.ttl)
