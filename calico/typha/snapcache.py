"""Typha's snapshot cache: the syncer's stream as a linked list of breadcrumbs.

One cache per syncer type; it is the syncer's callbacks. A cache thread slurps what the syncer
queued (up to ``max_batch_size`` updates, a status counting one), serialises each update once
(``validation``), applies it to the master map and mints a ``Breadcrumb`` per chunk of
``max_batch_size`` updates. Invariants (tests/unit/typha/test_snapcache.py):

- A delete is always recorded as a delta (even for an unknown key); an update whose value bytes
  equal the stored ones is skipped (``typha_updates_skipped``); snapshot entries are stored as
  NEW, deltas keep their real type.
- A batch's status change is applied to its *last* crumb only, so no client sees IN_SYNC before
  the updates that preceded it. No delta and no status change: no crumb.
- Copy-on-write: a crumb's snapshot is the master map itself, frozen; the next write copies the
  map first. So snapshots cost nothing until a client asks for one and then one copy per
  breadcrumb at most, and every client of that crumb shares it.
- Crumbs are linked with ``next`` (set once, by the cache thread); waiters and listeners on
  the server's event loop are woken through ``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from calico.syncer.api import SyncStatus, Update
from calico.syncer.typhaclient.messages import kvs_payload
from calico.typha.validation import Entry, validate_and_serialize

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Breadcrumb:
    seq: int
    timestamp: float
    deltas: list[Entry]
    status: SyncStatus
    _kvs: dict[str, Entry]
    next: Breadcrumb | None = None
    _delta_payload: bytes | None = field(default=None, repr=False)
    frames: dict[bool, bytes] = field(default_factory=dict, repr=False)  # server's frame cache

    def snapshot_entries(self) -> list[Entry]:
        return list(self._kvs.values())

    @property
    def size(self) -> int:
        return len(self._kvs)

    def delta_payload(self) -> bytes:
        """The crumb's deltas as one KVs payload, packed once for every client."""
        if self._delta_payload is None:
            self._delta_payload = kvs_payload([e.delta for e in self.deltas])
        return self._delta_payload


class SnapshotCache:
    def __init__(
        self,
        name: str,
        max_batch_size: int = 100,
        on_crumb: Callable[[Breadcrumb], None] | None = None,
        on_status: Callable[[SyncStatus], None] | None = None,
        on_update_counts: Callable[[int, int], None] | None = None,
    ) -> None:
        self.name = name
        self.max_batch_size = max_batch_size
        self._queue: queue.Queue[list[Update] | SyncStatus | None] = queue.Queue(
            maxsize=2 * max_batch_size
        )
        self._lock = threading.Lock()
        self._master: dict[str, Entry] = {}
        self._shared = False  # the master map is some crumb's snapshot: copy before writing
        self._current = Breadcrumb(0, time.time(), [], SyncStatus.WAIT_FOR_DATASTORE, self._master)
        self._on_crumb = on_crumb
        self._on_status = on_status
        self._on_update_counts = on_update_counts
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None
        self._listeners: list[Callable[[], None]] = []  # loop-side, run at every wake
        self._thread = threading.Thread(target=self._run, name=f"snapcache-{name}", daemon=True)

    # -- syncer callbacks (syncer thread) ------------------------------------------------------

    def on_updates(self, updates: list[Update]) -> None:
        if updates:
            self._queue.put(list(updates))

    def on_status_updated(self, status: SyncStatus) -> None:
        self._queue.put(status)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.attach_loop(loop)
        self._thread.start()

    def attach_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self._loop = loop

    def stop(self, timeout: float = 2.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout)

    # -- readers -------------------------------------------------------------------------------

    def current(self) -> Breadcrumb:
        """The latest crumb; its snapshot is frozen (copy-on-write) from here on."""
        with self._lock:
            self._shared = True
            return self._current

    def latest(self) -> Breadcrumb:
        """The latest crumb without freezing its snapshot (status, metrics)."""
        return self._current

    async def wait_next(self, crumb: Breadcrumb) -> tuple[Breadcrumb, bool]:
        """The crumb after ``crumb`` and whether we had to block for it."""
        if crumb.next is not None:
            return crumb.next, False
        while crumb.next is None:
            if self._event is None:
                self._event = asyncio.Event()
            event = self._event
            if crumb.next is not None:
                break
            await event.wait()
        return crumb.next, True

    def add_listener(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` on the loop whenever new crumbs were linked (the fan-out fast path)."""
        self._listeners.append(fn)

    def _wake(self) -> None:
        event, self._event = self._event, None
        if event is not None:
            event.set()
        for fn in self._listeners:
            fn()

    # -- cache thread --------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            updates: list[Update] = []
            status: SyncStatus | None = None
            count = 0
            stop = False
            while True:
                if isinstance(item, SyncStatus):
                    status = item
                    count += 1
                else:
                    updates.extend(item)
                    count += len(item)
                if count >= self.max_batch_size:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
            self._publish(updates, status)
            if stop:
                return

    def _publish(self, updates: list[Update], status: SyncStatus | None) -> None:
        size = self.max_batch_size
        chunks = [updates[i : i + size] for i in range(0, len(updates), size)] or [[]]
        for i, chunk in enumerate(chunks):
            self._mint(chunk, status if i == len(chunks) - 1 else None)
        if status is not None and self._on_status is not None:
            self._on_status(status)

    def _mint(self, chunk: list[Update], status: SyncStatus | None) -> None:
        entries = [validate_and_serialize(u) for u in chunk]
        deltas: list[Entry] = []
        skipped = 0
        with self._lock:
            master = self._master
            for entry in entries:
                old = master.get(entry.path)
                if entry.is_delete:
                    if old is not None:
                        master = self._writable()
                        del master[entry.path]
                    deltas.append(entry)
                elif old is not None and old.value_bytes == entry.value_bytes:
                    skipped += 1
                else:
                    master = self._writable()
                    master[entry.path] = entry
                    deltas.append(entry)
            prev = self._current
            new_status = status if status is not None else prev.status
            if not deltas and new_status is prev.status:
                crumb = None
            else:
                crumb = Breadcrumb(prev.seq + 1, time.time(), deltas, new_status, self._master)
                prev.next = crumb
                self._current = crumb
        if self._on_update_counts is not None:
            self._on_update_counts(len(entries), skipped)
        if crumb is None:
            return
        if self._on_crumb is not None:
            self._on_crumb(crumb)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # loop closed meanwhile (shutdown)
                loop.call_soon_threadsafe(self._wake)

    def _writable(self) -> dict[str, Entry]:
        if self._shared:
            self._master = dict(self._master)
            self._shared = False
        return self._master
