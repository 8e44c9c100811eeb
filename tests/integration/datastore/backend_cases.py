"""BackendCase: per-backend facts the conformance tests need (importable by test modules)."""

from __future__ import annotations

from collections.abc import Callable
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
    # How to compact history: the backend itself, or (Kubernetes) the API server's etcd.
    compactor: Callable[[Backend, int], None] | None = None

    @property
    def has_ttl(self) -> bool:
        return self.ttl > 0

    @property
    def names(self) -> list[str]:
        """Key names the backend can store (Kubernetes names: no ``/``, lower case)."""
        if self.kind == "kubernetes":
            return ["b", "a", "a.x", "ab", "c", "a-b", "0z"]
        return ["b", "a", "a/x", "ab", "c", "a-b", "Z"]

    def foreign_key(self, prefix: str) -> str:
        """A key outside ``prefix`` that shares it minus the trailing slash where possible."""
        if self.kind == "kubernetes":  # only known plurals are keys: use a sibling kind
            return "/calico/resources/v3/projectcalico.org/ipreservations/other"
        return prefix.rstrip("/") + "x/other"

    def compact(self, backend: Backend, revision: int) -> None:
        if self.compactor is not None:
            self.compactor(backend, revision)
        else:
            backend.compact(revision)

    def open(self) -> Backend:
        """Another client of the same keyspace (closed at teardown)."""
        backend = open_backend(self.spec)
        self.backends.append(backend)
        return backend
