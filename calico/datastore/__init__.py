"""Datastore access: the Backend protocol, its backends and the typed client on top."""

from calico.datastore.backend import (
    Backend,
    EventType,
    KVPair,
    ListResult,
    Watch,
    WatchEvent,
)
from calico.datastore.errors import (
    ConnectionFailedError,
    DatastoreConfigError,
    DatastoreError,
    InvalidValueError,
    OperationNotSupportedError,
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
    RevisionCompactedError,
    UpdateConflictError,
)

__all__ = [
    "Backend",
    "ConnectionFailedError",
    "DatastoreConfigError",
    "DatastoreError",
    "EventType",
    "InvalidValueError",
    "KVPair",
    "ListResult",
    "OperationNotSupportedError",
    "ResourceAlreadyExistsError",
    "ResourceDoesNotExistError",
    "RevisionCompactedError",
    "UpdateConflictError",
    "Watch",
    "WatchEvent",
]
