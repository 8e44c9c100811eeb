"""Watches on the local datastore: one poller thread per backend fans the change log out.

Other processes commit to the same file, so there is nothing to subscribe to; instead a single
thread checks ``PRAGMA data_version`` (about 2 us) when inotify says the database's files were
written (calico.datastore.local.wake) and, when it moved, reads the new ``changes`` rows once for
all watches. Where inotify cannot be trusted it checks every ``poll_interval`` instead, as it
always did before (design/performance.md "Watch latency"). Local writes kick the poller. Each
watch keeps a cursor (the last revision it has seen) so delivery is exactly once and in order,
and a cursor below the compaction point ends the watch with RevisionCompactedError.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

from calico.datastore.backend import EventType, WatchEvent
from calico.datastore.errors import DatastoreError, RevisionCompactedError
from calico.datastore.local.sqlite import is_busy, wrap_error
from calico.datastore.local.txn import EVENT_TYPES
from calico.datastore.local.wake import Waker

log = logging.getLogger(__name__)

# Rows read per query while catching up, so a long backlog never sits in memory twice.
FETCH_BATCH = 5000
# After an inotify wake that found no new commit yet (the writer updates the WAL index just
# after writing its frames), re-check every HOT_INTERVAL for up to WAKE_GRACE seconds.
HOT_INTERVAL = 0.0002
WAKE_GRACE = 0.01
# With inotify trusted, an idle poller still checks this often (a safety net, not the path).
IDLE_CHECK = 0.5


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
        self._waker: Waker | None = None  # made with the thread: a backend that never watches
        # holds no inotify instance (a per-user limit, 128 by default)

    def add(self, watch: LocalWatch) -> None:
        with self._cond:
            if self._closed:
                raise DatastoreError(f"local datastore {self._path} is closed")
            self._watches.add(watch)
            self._kicked = True
            if self._thread is None:
                self._waker = Waker(self._path)
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
                if self._waker is not None:
                    self._waker.kick()

    def _set_kicked(self) -> None:
        with self._cond:
            self._kicked = True

    def close(self) -> None:
        with self._cond:
            self._closed = True
            watches, self._watches = list(self._watches), set()
            self._cond.notify_all()
            if self._waker is not None:
                self._waker.kick()
            thread = self._thread
        for watch in watches:
            watch.stop()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)

    def _run(self) -> None:
        try:
            conn = self._connect()
        except DatastoreError as exc:
            self._fail_all(exc)
            return
        waker = self._waker
        assert waker is not None
        last_version = None
        hot_until = 0.0  # woken by a write whose commit was not visible yet: re-check soon
        try:
            while True:
                with self._cond:
                    while not self._closed and not self._watches:
                        self._cond.wait()
                    if self._closed:
                        return
                    kicked = self._kicked
                written = False
                if not kicked:
                    written = waker.wait(self._timeout(waker, hot_until))
                with self._cond:
                    if self._closed:
                        return
                    kicked, self._kicked = self._kicked, False
                    watches = [w for w in self._watches if w.active]
                try:
                    version = conn.execute("PRAGMA data_version").fetchone()[0]
                    moved = version != last_version
                    if written and not moved:
                        hot_until = time.monotonic() + WAKE_GRACE
                    elif moved:
                        announced = written or kicked or hot_until > 0.0
                        hot_until = 0.0
                        if not announced and last_version is not None:
                            self._unannounced(waker)
                    if kicked or moved:
                        last_version = version
                        self._fetch(conn, watches)
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
        finally:
            with self._cond:  # kick() uses the fds under the same lock
                waker.close()

    def _timeout(self, waker: Waker, hot_until: float) -> float:
        """How long the poller may sleep: the poll interval while woken-but-not-yet-visible or
        when inotify cannot be trusted, else until the next TTL expiry (at most IDLE_CHECK)."""
        if waker.unreliable:
            return self._interval
        now = time.monotonic()
        if now < hot_until:
            return min(self._interval, HOT_INTERVAL)
        timeout = IDLE_CHECK
        if self._next_expiry is not None:
            timeout = min(timeout, max(self._next_expiry - time.time(), 0.0))
        return timeout

    def _unannounced(self, waker: Waker) -> None:
        """A commit arrived with no inotify event for it: poll every interval from now on."""
        if not waker.unreliable:
            waker.unreliable = True
            log.warning(
                "local datastore %s: a commit was seen without an inotify event; watching by "
                "polling every %.3fs instead",
                self._path,
                self._interval,
            )

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
