"""Watches on the local datastore: one poller thread per backend fans the change log out.

Other processes commit to the same file, so there is nothing to subscribe to; instead a single
thread checks ``PRAGMA data_version`` (about 2 us) every ``poll_interval`` and, when it moved,
reads the new ``changes`` rows once for all watches. Local writes kick the poller directly, and
inotify watches on the database and its WAL (``notify.py``) end the wait as soon as any process
writes them, so a cross-process commit is seen without waiting for the tick; while inotify is
known to see every commit the tick stretches to ``NOTIFIED_TICK`` (or the next expiry). Each
watch keeps a cursor (the last revision it has seen) so delivery is exactly once and in order,
and a cursor below the compaction point ends the watch with RevisionCompactedError.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

from calico.datastore.backend import EventType, WatchEvent
from calico.datastore.errors import DatastoreError, RevisionCompactedError
from calico.datastore.local.notify import ChangeNotifier
from calico.datastore.local.sqlite import is_busy, wrap_error
from calico.datastore.local.txn import EVENT_TYPES

# Rows read per query while catching up, so a long backlog never sits in memory twice.
FETCH_BATCH = 5000
# The idle wait while inotify sees every commit (``ChangeNotifier.reliable``): only a safety
# net then, so the poller wakes 10 times a second rather than 500 (notify.py).
NOTIFIED_TICK = 0.1
# A commit's last write to the -wal comes before its wal-index header (shared memory, which
# makes no inotify event) says it is committed, so a wake-up that finds no new version may
# have raced the writer: the poller then looks again after SETTLE_FIRST (the header usually
# lands microseconds after the write), doubling the wait each time nothing came, up to
# NOTIFIED_TICK (a header that lands t late is seen by ~2t).
SETTLE_FIRST = 0.00025


class LocalWatch:
    """A Watch fed by the poller; ``cursor`` is owned by the poller thread."""

    def __init__(self, prefix: str, revision: int, on_stop: Callable[[LocalWatch], None]) -> None:
        self.prefix = prefix
        self.cursor = revision
        self._on_stop = on_stop
        self._cond = threading.Condition()
        self._events: deque[WatchEvent] = deque()
        self._stopped = False
        self._ended = False  # an ERROR was queued: nothing may follow it

    @property
    def active(self) -> bool:
        return not (self._stopped or self._ended)

    def deliver(self, events: list[WatchEvent]) -> None:
        """Called by the poller with events the watch has not seen, in revision order."""
        if not events:
            return
        with self._cond:
            if self.active:
                self._events.extend(events)
                self._cond.notify_all()

    def fail(self, error: Exception) -> None:
        """Queue the final ERROR event."""
        with self._cond:
            if self.active:
                self._events.append(WatchEvent(EventType.ERROR, error=error))
                self._ended = True
                self._cond.notify_all()

    def next(self, timeout: float | None = None) -> WatchEvent | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._events:
                if self._stopped or self._ended:
                    return None
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._cond.wait(remaining)
            if self._stopped:
                return None
            return self._events.popleft()

    def stop(self) -> None:
        with self._cond:
            if self._stopped:
                return
            self._stopped = True
            self._events.clear()
            self._cond.notify_all()
        self._on_stop(self)

    def __iter__(self) -> Iterator[WatchEvent]:
        while (event := self.next()) is not None:
            yield event
            if event.type is EventType.ERROR:
                return


class Poller:
    """Owns the poll thread: started by the first watch, joined by ``close``."""

    def __init__(
        self,
        path: Path,
        connect: Callable[[], sqlite3.Connection],
        sweep: Callable[[], None],
        interval: float,
    ) -> None:
        self._path = path
        self._connect = connect
        self._sweep = sweep
        self._interval = interval
        self._cond = threading.Condition()
        self._watches: set[LocalWatch] = set()
        self._kicked = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._next_expiry: float | None = None
        self._notifier: ChangeNotifier | None = None  # made with the thread, closed by it

    def add(self, watch: LocalWatch) -> None:
        with self._cond:
            if self._closed:
                raise DatastoreError(f"local datastore {self._path} is closed")
            self._watches.add(watch)
            self._kicked = True
            if self._notifier is not None:
                self._notifier.kick()
            if self._thread is None:
                self._notifier = ChangeNotifier(self._path)
                self._thread = threading.Thread(
                    target=self._run, name=f"calico-local-watch:{self._path}", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def remove(self, watch: LocalWatch) -> None:
        with self._cond:
            self._watches.discard(watch)

    def kick(self) -> None:
        """Something was committed in this process: look now rather than at the next tick."""
        with self._cond:
            if self._watches:
                self._kicked = True
                self._cond.notify_all()
                if self._notifier is not None:
                    self._notifier.kick()

    def _set_kicked(self) -> None:
        with self._cond:
            self._kicked = True

    def close(self) -> None:
        with self._cond:
            self._closed = True
            watches, self._watches = list(self._watches), set()
            self._cond.notify_all()
            thread = self._thread
            if self._notifier is not None:
                self._notifier.kick()
        for watch in watches:
            watch.stop()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)

    def _run(self) -> None:
        try:
            self._poll()
        finally:
            with self._cond:  # kicks only touch the notifier under the lock
                if self._notifier is not None:
                    self._notifier.close()
                    self._notifier = None

    def _poll(self) -> None:
        try:
            conn = self._connect()
        except DatastoreError as exc:
            self._fail_all(exc)
            return
        last_version = None
        notifier = self._notifier
        assert notifier is not None
        settle: float | None = None  # the next wait after a wake-up that found nothing new
        while True:
            with self._cond:
                while not self._closed and not self._watches:
                    self._cond.wait()
                idle = not self._closed and not self._kicked
            woken = False
            if idle:  # outside the lock: kicks and file writes end this wait (notify.py)
                long_wait = self._notified_wait()
                if settle is not None:
                    long_wait = min(settle, long_wait)
                woken = notifier.wait(self._interval, reliable_timeout=long_wait)
            with self._cond:
                if self._closed:
                    return
                kicked, self._kicked = self._kicked, False
                watches = [w for w in self._watches if w.active]
            try:
                version = conn.execute("PRAGMA data_version").fetchone()[0]
                if kicked or version != last_version:
                    last_version = version
                    self._fetch(conn, watches)
                    settle = None
                elif woken:
                    settle = min(SETTLE_FIRST, self._interval)
                elif settle is not None:
                    settle = settle * 2 if settle * 2 < NOTIFIED_TICK else None
                if self._next_expiry is not None and time.time() >= self._next_expiry:
                    self._next_expiry = None
                    self._sweep()
                    self._set_kicked()  # re-read the next expiry even if nothing was swept
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if is_busy(exc):
                    self._set_kicked()
                    time.sleep(self._interval)
                    continue
                self._fail_all(wrap_error(self._path, exc))
            except DatastoreError as exc:
                self._fail_all(exc)

    def _notified_wait(self) -> float:
        """The idle wait while every commit wakes the poller: the safety tick, or until the
        next expiry is due (expired keys are swept by the poller, not announced by a write)."""
        wait = max(self._interval, NOTIFIED_TICK)
        if self._next_expiry is not None:
            wait = min(wait, max(self._interval, self._next_expiry - time.time()))
        return wait

    def _fetch(self, conn: sqlite3.Connection, watches: list[LocalWatch]) -> None:
        """Deliver every change past each watch's cursor, in batches, from one snapshot each."""
        while watches:
            cursor = min(w.cursor for w in watches)
            conn.execute("BEGIN")
            try:
                meta = dict(conn.execute("SELECT name, value FROM meta").fetchall())
                rows = conn.execute(
                    "SELECT revision, key, type, value, prev_value FROM changes"
                    " WHERE revision > ? ORDER BY revision LIMIT ?",
                    (cursor, FETCH_BATCH),
                ).fetchall()
                self._next_expiry = conn.execute(
                    "SELECT min(expires_at) FROM kv WHERE expires_at IS NOT NULL"
                ).fetchone()[0]
            finally:
                conn.execute("COMMIT")
            full = len(rows) == FETCH_BATCH
            high = rows[-1][0] if full else int(meta["revision"])
            compacted = int(meta["compacted"])
            events = [
                WatchEvent(EVENT_TYPES[kind], key, value, prev, rev)
                for rev, key, kind, value, prev in rows
            ]
            for watch in watches:
                if watch.cursor < compacted:
                    watch.fail(RevisionCompactedError(watch.cursor, compacted))
                    self.remove(watch)
                    continue
                after, prefix = watch.cursor, watch.prefix
                watch.deliver(
                    [ev for ev in events if ev.revision > after and ev.key.startswith(prefix)]
                )
                watch.cursor = max(watch.cursor, high)
            if not full:
                return
            watches = [w for w in watches if w.active]

    def _fail_all(self, error: Exception) -> None:
        with self._cond:
            watches, self._watches = list(self._watches), set()
        for watch in watches:
            watch.fail(error)
