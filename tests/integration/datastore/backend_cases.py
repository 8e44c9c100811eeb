"""BackendCase: per-backend facts the conformance tests need (importable by test modules)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from procs import open_backend

from calico.datastore import Backend


@dataclass
class BackendCase:
    kind: str
    spec: dict[str, Any]  # JSON-able: procs.open_backend(spec) opens the same keyspace
    ttl: float  # shortest TTL the backend honours (etcd leases: whole seconds, a minimum)
    expiry_wait: float  # how long after creation a TTL key may take to vanish
    backends: list[Backend] = field(default_factory=list)

    def open(self) -> Backend:
        """Another client of the same keyspace (closed at teardown)."""
        backend = open_backend(self.spec)
        self.backends.append(backend)
        return backend
