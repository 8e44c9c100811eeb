"""The Backend protocol: an etcd-shaped key/value store every datastore implements.

Keys are upstream's path strings (``/calico/resources/v3/projectcalico.org/ippools/pool1``,
``/calico/felix/v2/...`` status keys); values are JSON text. Every write bumps one global revision
counter; a key's ``revision`` is the revision of its last write (etcd's mod revision), which the
typed client exposes as ``metadata.resourceVersion``. Keeping the protocol at this level lets the
local SQLite file and etcd share one conformance suite and one typed client on top.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple, Protocol, runtime_checkable


class KVPair(NamedTuple):
    """One stored key. A named tuple, not a frozen dataclass: a list builds one per key, and a
    frozen dataclass's ``__init__`` (four ``object.__setattr__`` calls) cost as much as
    SQLite's own read of 100,000 rows (design/performance.md "Datastore listing")."""

    key: str
    value: str  # JSON text
    revision: int  # revision of the last write to this key
    ttl: float | None = None  # seconds; None = no expiry


@dataclass(frozen=True)
class ListResult:
    kvs: list[KVPair]
    revision: int  # store revision the list is consistent at: watch from here


class EventType(Enum):
    ADDED = "added"
    MODIFIED = "modified"
    DELETED = "deleted"
    ERROR = "error"  # ``error`` holds the exception; the watch is over after it
    BOOKMARK = "bookmark"  # progress only: ``revision`` reached, no key


@dataclass(frozen=True)
class WatchEvent:
    type: EventType
    key: str = ""
    value: str | None = None  # new value; None for deletes
    prev_value: str | None = None  # value before this event, when the backend knows it
    revision: int = 0
    error: Exception | None = None


@runtime_checkable
class Watch(Protocol):
    """A stream of events for a key prefix, in revision order, each exactly once."""

    def next(self, timeout: float | None = None) -> WatchEvent | None:
        """The next event, or None when ``timeout`` passes first or the watch was stopped."""
        ...

    def stop(self) -> None:
        """End the watch; idempotent, callable from any thread; wakes a blocked ``next``."""
        ...

    def __iter__(self) -> Iterator[WatchEvent]:
        """Iterate until stopped; an ERROR event is the last one."""
        ...


@runtime_checkable
class Backend(Protocol):
    """Operations every datastore provides. All methods are thread-safe."""

    def create(self, key: str, value: str, ttl: float | None = None) -> KVPair:
        """Write a new key. Raises ResourceAlreadyExistsError if it exists."""
        ...

    def update(self, key: str, value: str, revision: int, ttl: float | None = None) -> KVPair:
        """Compare-and-swap: write only if the key's current revision is ``revision``.

        Raises ResourceDoesNotExistError, or UpdateConflictError on a revision mismatch.
        """
        ...

    def apply(self, key: str, value: str, ttl: float | None = None) -> KVPair:
        """Create or overwrite unconditionally."""
        ...

    def delete(self, key: str, revision: int | None = None) -> KVPair:
        """Delete (only at ``revision`` when given); returns the deleted pair.

        Raises ResourceDoesNotExistError, or UpdateConflictError on a revision mismatch.
        """
        ...

    def get(self, key: str) -> KVPair:
        """Raises ResourceDoesNotExistError."""
        ...

    def list(self, prefix: str) -> ListResult:
        """Every live key starting with ``prefix``, sorted by key, with the store revision."""
        ...

    def watch(self, prefix: str, revision: int) -> Watch:
        """Events for keys under ``prefix`` with revision > ``revision``.

        If ``revision`` is older than the compaction point the first event is an ERROR carrying
        RevisionCompactedError. TTL expiries arrive as DELETED events.
        """
        ...

    def current_revision(self) -> int: ...

    def compact(self, revision: int) -> None:
        """Forget history at or below ``revision`` (watches from before it get "too old")."""
        ...

    def close(self) -> None: ...
