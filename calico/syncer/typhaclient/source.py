"""A Typha stream as a drop-in syncer: the client behind a restart-aware dedupe buffer.

Components other than Felix (confd) swap their local syncer for this when ``<PREFIX>TYPHAADDR``
is set, as upstream's ``MustStartSyncerClientIfTyphaConfigured`` always wraps the callbacks in a
dedupe buffer: after a reconnect the buffer synthesises deletes for keys the new snapshot lacks.
"""

from __future__ import annotations

from calico.syncer.api import SyncerCallbacks
from calico.syncer.dedupebuffer import DedupeBuffer
from calico.syncer.typhaclient.client import ClientSettings, SyncClient


class TyphaSyncer:
    """``start()``/``stop()`` like ``WatcherSyncer``; no datastore access at all."""

    def __init__(self, settings: ClientSettings, callbacks: SyncerCallbacks) -> None:
        self.buffer = DedupeBuffer(callbacks)
        self.client = SyncClient(settings, self.buffer)

    def start(self) -> None:
        self.buffer.start()
        self.client.start()

    def stop(self, timeout: float = 5.0) -> None:
        self.client.stop(timeout)
        self.buffer.stop(timeout)
