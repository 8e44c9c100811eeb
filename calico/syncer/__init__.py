"""Syncers: list + watch the datastore and feed consumers v1 model keys, with sync status."""

from calico.syncer.api import RestartAwareCallbacks, SyncerCallbacks, SyncStatus, Update, UpdateType
from calico.syncer.dedupebuffer import DedupeBuffer
from calico.syncer.watchersyncer import ResourceType, WatcherSyncer

__all__ = [
    "DedupeBuffer",
    "ResourceType",
    "RestartAwareCallbacks",
    "SyncStatus",
    "SyncerCallbacks",
    "Update",
    "UpdateType",
    "WatcherSyncer",
]
