"""The syncer API every consumer (felix, confd, Typha) sees: statuses, updates, callbacks.

Updates carry typed v1 model keys (``calico.model`` Key objects) and typed values
(``calico.model.values``, plain strings/booleans for config keys, the v3 resource for a
``ResourceKey``); paths and JSON exist only where data crosses a process boundary.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, runtime_checkable

from calico.model import Key


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


@dataclass(frozen=True, slots=True)
class Update:
    """One key's change. ``value`` None means deleted (or unparseable upstream)."""

    key: Key
    value: Any
    revision: str
    update_type: UpdateType
    ttl: float | None = None


def sorted_keys(keys: Iterable[Key]) -> list[Key]:
    """Keys in a stable order (by path), for the synthetic deletes of a stop or a resync."""
    return sorted(keys, key=lambda k: k.default_path())


@runtime_checkable
class SyncerCallbacks(Protocol):
    def on_status_updated(self, status: SyncStatus) -> None: ...

    def on_updates(self, updates: list[Update]) -> None: ...


@runtime_checkable
class RestartAwareCallbacks(SyncerCallbacks, Protocol):
    """Callbacks that survive a reconnect (Typha client): told before the resync starts."""

    def on_typha_connection_restarted(self) -> None: ...
