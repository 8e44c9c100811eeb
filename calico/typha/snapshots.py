"""Pre-encoded snapshots shared by the clients that connect together.

The first client to ask (per syncer type and compression) freezes the current breadcrumb and
has its snapshot encoded, off the event loop, into one bytes object of frames: KVs chunks of
1000 entries (compressed) or ``max_message_size`` entries (plain). Clients asking while that
snapshot is fresh reuse it (``typha_snapshots_reused``) and then follow deltas from its
breadcrumb. A snapshot expires once ``timeout`` (1 s) has passed *and* a newer breadcrumb exists.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from calico.syncer.typhaclient import framing
from calico.syncer.typhaclient.messages import kvs_payload
from calico.typha.metrics import TyphaMetrics
from calico.typha.snapcache import Breadcrumb, SnapshotCache

COMPRESSED_CHUNK = 1000


@dataclass
class _Snapshot:
    crumb: Breadcrumb
    created: float
    blob: asyncio.Future[bytes]


def encode_snapshot(crumb: Breadcrumb, compressed: bool, chunk: int) -> tuple[bytes, int]:
    """(the frames, the uncompressed payload bytes)."""
    entries = crumb.snapshot_entries()
    frames = []
    raw = 0
    for i in range(0, len(entries), chunk):
        payload = kvs_payload([e.snapshot for e in entries[i : i + chunk]])
        raw += len(payload)
        frames.append(framing.frame(payload, compressed))
    return b"".join(frames), raw


class SnapshotCacheSet:
    def __init__(
        self,
        cache: SnapshotCache,
        metrics: TyphaMetrics,
        max_message_size: int = 100,
        timeout: float = 1.0,
    ) -> None:
        self._cache = cache
        self._metrics = metrics
        self._chunk = {True: COMPRESSED_CHUNK, False: max_message_size}
        self._timeout = timeout
        self._active: dict[bool, _Snapshot] = {}

    async def get(self, compressed: bool) -> tuple[Breadcrumb, bytes]:
        loop = asyncio.get_running_loop()
        snap = self._active.get(compressed)
        now = time.monotonic()
        if snap is not None and (
            now - snap.created < self._timeout or self._cache.latest() is snap.crumb
        ):
            self._metrics.snapshots_reused.labels(self._cache.name).inc()
        else:
            crumb = self._cache.current()
            future = loop.run_in_executor(
                None, encode_snapshot, crumb, compressed, self._chunk[compressed]
            )
            blob: asyncio.Future[bytes] = loop.create_future()

            def done(
                f: asyncio.Future[tuple[bytes, int]], out: asyncio.Future[bytes] = blob
            ) -> None:
                if f.exception() is not None:
                    out.set_exception(f.exception())  # type: ignore[arg-type]
                    return
                data, raw = f.result()
                name = self._cache.name
                if compressed:
                    self._metrics.snapshot_compressed_bytes.labels(name).set(len(data))
                else:
                    self._metrics.snapshot_raw_bytes.labels(name).set(raw)
                out.set_result(data)

            future.add_done_callback(done)
            snap = _Snapshot(crumb, now, blob)
            self._active[compressed] = snap
            self._metrics.snapshots_generated.labels(self._cache.name).inc()
        return snap.crumb, await asyncio.shield(snap.blob)
