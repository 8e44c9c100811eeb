"""A dict-backed Backend for fast, deterministic IPAM unit tests (no watch support)."""

from __future__ import annotations

import threading

from calico.datastore.backend import KVPair, ListResult
from calico.datastore.errors import (
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
    UpdateConflictError,
)


class MemoryBackend:
    def __init__(self) -> None:
        self.data: dict[str, KVPair] = {}
        self.revision = 0
        self.lock = threading.Lock()
        self.writes = 0

    def _put(self, key: str, value: str) -> KVPair:
        self.revision += 1
        self.writes += 1
        kv = KVPair(key, value, self.revision)
        self.data[key] = kv
        return kv

    def create(self, key: str, value: str, ttl: float | None = None) -> KVPair:
        with self.lock:
            if key in self.data:
                raise ResourceAlreadyExistsError(key)
            return self._put(key, value)

    def update(self, key: str, value: str, revision: int, ttl: float | None = None) -> KVPair:
        with self.lock:
            if key not in self.data:
                raise ResourceDoesNotExistError(key)
            if self.data[key].revision != revision:
                raise UpdateConflictError(key)
            return self._put(key, value)

    def apply(self, key: str, value: str, ttl: float | None = None) -> KVPair:
        with self.lock:
            return self._put(key, value)

    def delete(self, key: str, revision: int | None = None) -> KVPair:
        with self.lock:
            if key not in self.data:
                raise ResourceDoesNotExistError(key)
            if revision is not None and self.data[key].revision != revision:
                raise UpdateConflictError(key)
            self.revision += 1
            return self.data.pop(key)

    def get(self, key: str) -> KVPair:
        with self.lock:
            if key not in self.data:
                raise ResourceDoesNotExistError(key)
            return self.data[key]

    def list(self, prefix: str) -> ListResult:
        with self.lock:
            kvs = sorted(
                (kv for k, kv in self.data.items() if k.startswith(prefix)), key=lambda kv: kv.key
            )
            return ListResult(kvs, self.revision)

    def current_revision(self) -> int:
        return self.revision

    def close(self) -> None:
        pass
