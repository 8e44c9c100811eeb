"""The syncer API every consumer (felix, confd, Typha) sees: statuses, updates, callbacks."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, runtime_checkable


class SyncStatus(Enum):
    """How complete the consumer's picture is. The values are upstream's String() forms."""

    WAIT_FOR_DATASTORE = "wait-for-ready"  # not connected, or data not usable yet
    RESYNC_IN_PROGRESS = "resync"  # listing: existing keys plus concurrent changes flow
    IN_SYNC = "in-sync"  # every existing key delivered: the consumer has the full picture


class UpdateType(Enum):
    UNKNOWN = "unknown"
    NEW = "new"
    UPDATED = "updated"
    DELETED = "deleted"


@dataclass(frozen=True)
class Update:
    """One key's change. ``value`` None means deleted (or unparseable upstream)."""

    key: str
    value: Any
    revision: str
    update_type: UpdateType
    ttl: float | None = None


@runtime_checkable
class SyncerCallbacks(Protocol):
    def on_status_updated(self, status: SyncStatus) -> None: ...

    def on_updates(self, updates: list[Update]) -> None: ...


@runtime_checkable
class RestartAwareCallbacks(SyncerCallbacks, Protocol):
    """Callbacks that survive a reconnect (Typha client): told before the resync starts."""

    def on_typha_connection_restarted(self) -> None: ...
