"""LocalBackend: the Backend protocol on one SQLite file shared by every process on the host.

calicoctl, the CNI plugin, felix and confd are separate processes, so all coordination goes
through the file: writes are BEGIN IMMEDIATE transactions (SQLite's single writer lock, waited on
by the busy handler and ``retry_busy``), readers use WAL snapshots and never block writers. Within
a process each thread gets its own connection, and a process-local lock serialises writers so
threads queue on a cheap mutex instead of SQLite's sleeping busy handler.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from calico.datastore.backend import KVPair, ListResult
from calico.datastore.errors import (
    DatastoreError,
    InvalidValueError,
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
    UpdateConflictError,
)
from calico.datastore.gcdefer import deferred
from calico.datastore.local.schema import migrate
from calico.datastore.local.sqlite import (
    Synchronous,
    connect,
    create_file,
    retry_busy,
    wrap_error,
)
from calico.datastore.local.txn import WriteTxn
from calico.datastore.local.watch import LocalWatch, Poller

T = TypeVar("T")

DEFAULT_COMPACTION_KEEP = 10_000  # revisions of history kept for watchers that fall behind
DEFAULT_POLL_INTERVAL = 0.002  # seconds between cross-process change checks while watching


class _ThreadConn:
    """Holds one thread's connection; freed (and so closed) when its thread ends."""

    __slots__ = ("__weakref__", "conn")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn


def prefix_end(prefix: str) -> str | None:
    """The smallest string greater than every string starting with ``prefix`` (None: no bound).

    SQLite's BINARY collation compares UTF-8 bytes, which orders like Python's code points, so
    ``prefix <= key < prefix_end(prefix)`` is an index range scan.
    """
    stripped = prefix.rstrip("\U0010ffff")
    if not stripped:
        return None
    code = ord(stripped[-1]) + 1
    if 0xD800 <= code <= 0xDFFF:  # surrogates cannot be stored; skip past them
        code = 0xE000
    return stripped[:-1] + chr(code)


def _revision(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT value FROM meta WHERE name = 'revision'").fetchone()[0]


def _check_key(key: str) -> None:
    if not isinstance(key, str) or not key:
        raise InvalidValueError(f"invalid key {key!r}: keys are non-empty strings")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidValueError(f"invalid key {key!r}: {exc}") from exc


def _check_value(key: str, value: str, ttl: float | None) -> None:
    _check_key(key)
    if not isinstance(value, str):
        raise InvalidValueError(f"invalid value for {key}: expected JSON text, got {type(value)}")
    if ttl is not None and not ttl > 0:
        raise InvalidValueError(f"invalid ttl for {key}: {ttl!r} (must be > 0 seconds)")


class LocalBackend:
    """The embedded default datastore (``DATASTORE_TYPE=local``)."""

    def __init__(
        self,
        path: str | Path,
        *,
        compaction_keep: int = DEFAULT_COMPACTION_KEEP,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        synchronous: Synchronous = "NORMAL",
    ) -> None:
        if compaction_keep < 0:
            raise ValueError(f"compaction_keep must be >= 0, got {compaction_keep}")
        if not poll_interval > 0:
            raise ValueError(f"poll_interval must be > 0, got {poll_interval}")
        self.path = Path(path)
        self._keep = compaction_keep
        self._synchronous = synchronous
        self._local = threading.local()
        self._conns: weakref.WeakSet[_ThreadConn] = weakref.WeakSet()
        self._lock = threading.Lock()  # guards _conns and _closed
        self._write_lock = threading.Lock()
        self._closed = False
        create_file(self.path)
        conn = self._conn()
        try:
            retry_busy(lambda: migrate(conn, self.path))
        except sqlite3.Error as exc:
            self.close()
            raise wrap_error(self.path, exc, opening=True) from exc
        except BaseException:
            self.close()
            raise
        self._poller = Poller(self.path, self._conn, self._sweep, poll_interval)

    def __repr__(self) -> str:
        return f"LocalBackend({str(self.path)!r})"

    def __enter__(self) -> LocalBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes ---------------------------------------------------------------------------------

    def create(self, key: str, value: str, ttl: float | None = None) -> KVPair:
        _check_value(key, value, ttl)

        def op(txn: WriteTxn) -> KVPair:
            if txn.row(key) is not None:
                raise ResourceAlreadyExistsError(key)
            return txn.put(key, value, ttl, None)

        return self._write(op)

    def update(self, key: str, value: str, revision: int, ttl: float | None = None) -> KVPair:
        _check_value(key, value, ttl)

        def op(txn: WriteTxn) -> KVPair:
            prev = txn.row(key)
            if prev is None:
                raise ResourceDoesNotExistError(key)
            if prev.revision != revision:
                raise UpdateConflictError(key, f"revision {revision} != current {prev.revision}")
            return txn.put(key, value, ttl, prev)

        return self._write(op)

    def apply(self, key: str, value: str, ttl: float | None = None) -> KVPair:
        _check_value(key, value, ttl)
        return self._write(lambda txn: txn.put(key, value, ttl, txn.row(key)))

    def apply_many(self, items: Iterable[tuple[str, str]]) -> int:
        """Apply many keys in one transaction (one revision each); returns the last revision.

        Not part of the Backend protocol: bulk loads (imports, benchmarks) that would otherwise
        pay one commit per key.
        """
        batch = list(items)
        for key, value in batch:
            _check_value(key, value, None)

        def op(txn: WriteTxn) -> int:
            for key, value in batch:
                txn.put(key, value, None, txn.row(key))
            return txn.revision

        return self._write(op)

    def delete(self, key: str, revision: int | None = None) -> KVPair:
        _check_key(key)

        def op(txn: WriteTxn) -> KVPair:
            prev = txn.row(key)
            if prev is None:
                raise ResourceDoesNotExistError(key)
            if revision is not None and prev.revision != revision:
                raise UpdateConflictError(key, f"revision {revision} != current {prev.revision}")
            txn.remove(prev)
            return prev.pair()

        return self._write(op)

    def compact(self, revision: int) -> None:
        def op(txn: WriteTxn) -> None:
            if revision > txn.revision:
                raise DatastoreError(
                    f"cannot compact local datastore {self.path} to revision {revision}: "
                    f"it is only at revision {txn.revision}"
                )
            txn.compact_to(revision)

        self._write(op)

    # -- reads ----------------------------------------------------------------------------------

    def get(self, key: str) -> KVPair:
        _check_key(key)
        found = self._read(
            lambda conn: conn.execute(
                "SELECT value, revision, ttl FROM kv"
                " WHERE key = ? AND (expires_at IS NULL OR expires_at > ?)",
                (key, time.time()),
            ).fetchone()
        )
        if found is None:
            raise ResourceDoesNotExistError(key)
        return KVPair(key, *found)

    def list(self, prefix: str) -> ListResult:
        if self._read(self._has_expired):
            # Delete them first so the returned revision already covers their DELETED events.
            self._sweep()
        end = prefix_end(prefix)
        sql = "SELECT key, value, revision, ttl FROM kv WHERE key >= ?"
        params: tuple[object, ...] = (prefix,)
        if end is not None:
            sql += " AND key < ?"
            params += (end,)
        sql += " AND (expires_at IS NULL OR expires_at > ?) ORDER BY key"

        def read(conn: sqlite3.Connection) -> ListResult:
            conn.execute("BEGIN")
            try:
                rev = _revision(conn)
                # tuple.__new__ straight from each 4-column row as the cursor yields it: no
                # per-key Python frame, no second list of rows alive, no collection mid-build.
                new = tuple.__new__
                with deferred():
                    kvs = [new(KVPair, row) for row in conn.execute(sql, (*params, time.time()))]
            finally:
                conn.execute("COMMIT")
            return ListResult(kvs, rev)

        return self._read(read)

    def current_revision(self) -> int:
        return self._read(_revision)

    def watch(self, prefix: str, revision: int) -> LocalWatch:
        watch = LocalWatch(prefix, max(revision, 0), self._poller.remove)
        self._poller.add(watch)
        return watch

    def close(self) -> None:
        """Stop every watch and close every connection; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        poller = getattr(self, "_poller", None)
        if poller is not None:
            poller.close()
        for holder in list(self._conns):
            holder.conn.close()

    # -- internals ------------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        holder: _ThreadConn | None = getattr(self._local, "holder", None)
        if holder is None:
            with self._lock:
                if self._closed:
                    raise DatastoreError(f"local datastore {self.path} is closed")
            holder = _ThreadConn(connect(self.path, self._synchronous))
            self._local.holder = holder
            with self._lock:
                self._conns.add(holder)
        return holder.conn

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn()

        def attempt() -> T:
            try:
                return fn(conn)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        try:
            return retry_busy(attempt)
        except sqlite3.Error as exc:
            raise wrap_error(self.path, exc) from exc

    def _write(self, fn: Callable[[WriteTxn], T]) -> T:
        """Run ``fn`` in a write transaction that first sweeps expired keys; retried on BUSY."""
        conn = self._conn()

        def attempt() -> tuple[T, bool]:
            conn.execute("BEGIN IMMEDIATE")
            try:
                txn = WriteTxn(conn, time.time())
                txn.sweep_expired()
                result = fn(txn)
                txn.finish(self._keep)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return result, txn.changed

        try:
            with self._write_lock:
                result, changed = retry_busy(attempt)
        except sqlite3.Error as exc:
            raise wrap_error(self.path, exc) from exc
        if changed:
            self._poller.kick()
        return result

    def _sweep(self) -> None:
        self._write(lambda txn: None)

    @staticmethod
    def _has_expired(conn: sqlite3.Connection) -> bool:
        found = conn.execute(
            "SELECT 1 FROM kv WHERE expires_at <= ? LIMIT 1", (time.time(),)
        ).fetchone()
        return found is not None
