"""The Kubernetes backend under the conformance suite: opaque test values as real resources.

The suite writes opaque JSON texts (``"1"``, ``{"cidr": ...}``); the Kubernetes datastore
stores v3 objects as custom resources, so this adapter wraps each text into a v3 object of the
key's kind (the text in an annotation, which travels through ``projectcalico.org/metadata``)
and unwraps what comes back. Every operation still goes through the real backend and the
official client over HTTP to the fake API server; only the value encoding differs.
"""

from __future__ import annotations

import json
from typing import Any

from calico.api.kind_table import KINDS_BY_PLURAL
from calico.datastore import Backend, KVPair, ListResult, WatchEvent
from calico.model.resources import RESOURCE_PREFIX

PAYLOAD = "conformance.test/payload"


def wrap(key: str, text: str) -> str:
    plural = key[len(RESOURCE_PREFIX) :].split("/")[0] if key.startswith(RESOURCE_PREFIX) else ""
    info = KINDS_BY_PLURAL.get(plural)
    kind = info.kind if info else "Unknown"
    return json.dumps(
        {
            "apiVersion": "projectcalico.org/v3",
            "kind": kind,
            "metadata": {"name": key.rsplit("/", 1)[-1], "annotations": {PAYLOAD: text}},
            "spec": {},
        }
    )


def unwrap(value: str | None) -> str | None:
    if value is None:
        return None
    return json.loads(value)["metadata"]["annotations"][PAYLOAD]


def _kv(kv: KVPair) -> KVPair:
    return KVPair(kv.key, unwrap(kv.value) or "", kv.revision, kv.ttl)


class _Watch:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def next(self, timeout: float | None = None) -> WatchEvent | None:
        event = self.inner.next(timeout)
        if event is None or (event.value is None and event.prev_value is None):
            return event
        return WatchEvent(
            event.type,
            event.key,
            unwrap(event.value),
            unwrap(event.prev_value),
            event.revision,
            event.error,
        )

    def stop(self) -> None:
        self.inner.stop()

    def __iter__(self):  # type: ignore[no-untyped-def]
        while (event := self.next()) is not None:
            yield event


class PayloadBackend:
    """A Backend that stores opaque texts through a Kubernetes backend (see module doc)."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner

    def create(self, key: str, value: str, ttl: float | None = None) -> KVPair:
        return _kv(self.inner.create(key, wrap(key, value), ttl))

    def update(self, key: str, value: str, revision: int, ttl: float | None = None) -> KVPair:
        return _kv(self.inner.update(key, wrap(key, value), revision, ttl))

    def apply(self, key: str, value: str, ttl: float | None = None) -> KVPair:
        return _kv(self.inner.apply(key, wrap(key, value), ttl))

    def delete(self, key: str, revision: int | None = None) -> KVPair:
        return _kv(self.inner.delete(key, revision))

    def get(self, key: str) -> KVPair:
        return _kv(self.inner.get(key))

    def list(self, prefix: str) -> ListResult:
        listed = self.inner.list(prefix)
        return ListResult([_kv(kv) for kv in listed.kvs], listed.revision)

    def watch(self, prefix: str, revision: int) -> _Watch:
        return _Watch(self.inner.watch(prefix, revision))

    def current_revision(self) -> int:
        return self.inner.current_revision()

    def compact(self, revision: int) -> None:
        self.inner.compact(revision)

    def close(self) -> None:
        self.inner.close()
