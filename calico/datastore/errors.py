"""The datastore's error hierarchy: callers catch these by name, whatever the backend."""

from __future__ import annotations


class DatastoreError(Exception):
    """Base of every datastore error."""


class ResourceAlreadyExistsError(DatastoreError):
    def __init__(self, key: str) -> None:
        super().__init__(f"resource already exists: {key}")
        self.key = key


class ResourceDoesNotExistError(DatastoreError):
    def __init__(self, key: str) -> None:
        super().__init__(f"resource does not exist: {key}")
        self.key = key


class UpdateConflictError(DatastoreError):
    """Compare-and-swap failed: the stored revision (or UID) is not the one the caller expected."""

    def __init__(self, key: str, detail: str = "") -> None:
        msg = f"update conflict: {key}"
        super().__init__(f"{msg}: {detail}" if detail else msg)
        self.key = key


class OperationNotSupportedError(DatastoreError):
    """Upstream's ErrorOperationNotSupported: "operation <op> is not supported on <id>[: why]"."""

    def __init__(self, operation: str, identifier: str, reason: str = "") -> None:
        text = f"operation {operation} is not supported on {identifier}"
        super().__init__(f"{text}: {reason}" if reason else text)


class RevisionCompactedError(DatastoreError):
    """A watch or read asked for history older than the compaction point: relist ("too old")."""

    def __init__(self, revision: int, compacted: int) -> None:
        super().__init__(
            f"requested revision {revision} has been compacted (oldest available {compacted}); "
            "too old, relist required"
        )
        self.revision = revision
        self.compacted = compacted


class ConnectionFailedError(DatastoreError):
    """The datastore could not be reached or opened (the message names where)."""


class InvalidValueError(DatastoreError):
    """A value that cannot be stored or decoded."""


class DatastoreConfigError(DatastoreError):
    """Bad or unsupported datastore configuration (DATASTORE_TYPE, calicoctl.cfg...)."""
