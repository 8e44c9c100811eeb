"""Syncer time to InSync with 100,000 keys on the local datastore (target <= 5 s).

Baseline, measured in the same run: a plain ``backend.list`` of the same keys — the floor any
syncer pays before it can say "in sync". The ratio shows the syncer's own overhead: parsing each
stored path into its ResourceKey, decoding the JSON and the per-key bookkeeping. The processor
forwards the stored JSON unchanged, so v3 validation (the update processors' cost) is not in it.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import emit

from calico.datastore.local import LocalBackend
from calico.model import Key, ResourceKey
from calico.model.resources import resource_prefix
from calico.syncer import ResourceType, SyncStatus, Update, WatcherSyncer

N_KEYS = 100_000
KINDS = ("Tier", "IPPool", "Profile", "GlobalNetworkSet")


def raw(key: ResourceKey, value: object) -> dict[Key, object]:
    return {key: value}


class Counter:
    def __init__(self) -> None:
        self.updates = 0
        self.in_sync = threading.Event()

    def on_status_updated(self, status: SyncStatus) -> None:
        if status is SyncStatus.IN_SYNC:
            self.in_sync.set()

    def on_updates(self, updates: list[Update]) -> None:
        self.updates += len(updates)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        backend = LocalBackend(Path(tmp) / "calico.db")
        value = json.dumps({"spec": {"selector": "app == 'web'", "order": 10}})
        prefixes = [resource_prefix(kind) for kind in KINDS]
        backend.apply_many((f"{prefixes[i % len(KINDS)]}key-{i:06d}", value) for i in range(N_KEYS))
        start = time.perf_counter()
        for prefix in prefixes:
            backend.list(prefix)
        list_time = time.perf_counter() - start

        counter = Counter()
        types = [ResourceType(kind, raw) for kind in KINDS]
        syncer = WatcherSyncer(backend, types, counter)
        start = time.perf_counter()
        syncer.start()
        if not counter.in_sync.wait(120):
            raise SystemExit("syncer did not reach InSync within 120 s")
        elapsed = time.perf_counter() - start
        syncer.stop()
        backend.close()
        assert counter.updates >= N_KEYS, counter.updates
    emit(
        "syncer",
        "time_to_in_sync_100k_keys_s",
        elapsed,
        list_time,
        keys=N_KEYS,
        target_s=5.0,
        meets_target=elapsed <= 5.0,
    )


if __name__ == "__main__":
    main()
