"""Kubernetes API errors -> the datastore's error hierarchy (upstream's resources/errors.go)."""

from __future__ import annotations

import json
from typing import Any

from calico.datastore.errors import (
    ConnectionFailedError,
    DatastoreError,
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
    RevisionCompactedError,
    UpdateConflictError,
)


class KubeAPIError(DatastoreError):
    """A non-2xx answer; ``status`` is the Kubernetes Status object (or {})."""

    def __init__(self, code: int, status: dict[str, Any], what: str) -> None:
        self.code = code
        self.status = status
        self.reason = str(status.get("reason", ""))
        self.message = str(status.get("message", "")) or f"HTTP {code}"
        super().__init__(f"{what}: {self.message} ({code})")


def parse_status(code: int, body: bytes, what: str) -> KubeAPIError:
    try:
        status = json.loads(body) if body else {}
    except ValueError:
        status = {"message": body[:200].decode(errors="replace")}
    if not isinstance(status, dict):
        status = {}
    return KubeAPIError(code, status, what)


def _causes(err: KubeAPIError) -> list[str]:
    details = err.status.get("details") or {}
    return [
        str(c.get("field", ""))
        for c in details.get("causes") or []
        if c.get("type") == "FieldValueInvalid"
    ]


def translate(err: KubeAPIError, key: str) -> DatastoreError:
    """The error a Backend caller sees for ``key``."""
    if err.code == 404:
        return ResourceDoesNotExistError(key)
    if err.code == 409 and err.reason == "AlreadyExists":
        return ResourceAlreadyExistsError(key)
    if err.code == 409:
        if "UID in precondition" in err.message:
            return ResourceDoesNotExistError(key)  # recreated since: the old one is gone
        return UpdateConflictError(key, err.message)
    if err.code in (401, 403):
        return ConnectionFailedError(f"connection is unauthorized: {err.message}")
    if err.code == 410:
        return RevisionCompactedError(0, 0)
    causes = _causes(err)
    if causes == ["metadata.uid"]:
        return ResourceDoesNotExistError(key)
    if causes == ["metadata.resourceVersion"]:
        return UpdateConflictError(key, err.message)
    return err
