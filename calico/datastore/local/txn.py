"""One write transaction: revision allocation, the change log, TTL sweeping, auto-compaction.

All writes go through ``WriteTxn`` so the invariants live in one place: every change bumps the
global revision by one, writes exactly one ``changes`` row, and a key's ``kv.revision`` is the
revision of its last write. Expired keys are deleted (with a DELETED change) at the start of every
write, before the caller looks at any key, so an expired key behaves exactly like an absent one.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from calico.datastore.backend import EventType, KVPair

ADDED, MODIFIED, DELETED = 1, 2, 3
EVENT_TYPES = {ADDED: EventType.ADDED, MODIFIED: EventType.MODIFIED, DELETED: EventType.DELETED}


@dataclass(frozen=True)
class Row:
    """A live ``kv`` row as the transaction found it."""

    key: str
    value: str
    revision: int
    ttl: float | None

    def pair(self) -> KVPair:
        return KVPair(self.key, self.value, self.revision, self.ttl)


def compaction_slack(keep: int) -> int:
    """How far past ``keep`` the log may grow before a compaction: amortises the DELETE."""
    return max(1, keep // 10)


class WriteTxn:
    """State of one open BEGIN IMMEDIATE transaction (the caller begins and commits it)."""

    def __init__(self, conn: sqlite3.Connection, now: float) -> None:
        self.conn = conn
        self.now = now
        meta = dict(conn.execute("SELECT name, value FROM meta").fetchall())
        self.start_revision = self.revision = int(meta["revision"])
        self.compacted = int(meta["compacted"])

    @property
    def changed(self) -> bool:
        return self.revision != self.start_revision

    def row(self, key: str) -> Row | None:
        found = self.conn.execute(
            "SELECT value, revision, ttl FROM kv WHERE key = ?", (key,)
        ).fetchone()
        return Row(key, *found) if found else None

    def put(self, key: str, value: str, ttl: float | None, prev: Row | None) -> KVPair:
        """Write ``key``; ``prev`` is its current row (None: it is new)."""
        rev = self._next_revision()
        expires = None if ttl is None else self.now + ttl
        if prev is None:
            self.conn.execute(
                "INSERT INTO kv (key, value, revision, create_revision, ttl, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (key, value, rev, rev, ttl, expires),
            )
            self._log(rev, key, ADDED, value, None)
        else:
            self.conn.execute(
                "UPDATE kv SET value = ?, revision = ?, ttl = ?, expires_at = ? WHERE key = ?",
                (value, rev, ttl, expires, key),
            )
            self._log(rev, key, MODIFIED, value, prev.value)
        return KVPair(key, value, rev, ttl)

    def remove(self, prev: Row) -> None:
        rev = self._next_revision()
        self.conn.execute("DELETE FROM kv WHERE key = ?", (prev.key,))
        self._log(rev, prev.key, DELETED, None, prev.value)

    def sweep_expired(self) -> int:
        """Delete every expired key with a DELETED change; returns how many."""
        expired = self.conn.execute(
            "SELECT key, value, revision, ttl FROM kv"
            " WHERE expires_at IS NOT NULL AND expires_at <= ? ORDER BY key",
            (self.now,),
        ).fetchall()
        for found in expired:
            self.remove(Row(*found))
        return len(expired)

    def compact_to(self, revision: int) -> None:
        """Drop history at or below ``revision`` (never above the current revision)."""
        revision = min(revision, self.revision)
        if revision <= self.compacted:
            return
        self.conn.execute("DELETE FROM changes WHERE revision <= ?", (revision,))
        self.conn.execute("UPDATE meta SET value = ? WHERE name = 'compacted'", (revision,))
        self.compacted = revision

    def finish(self, keep: int | None) -> None:
        """Persist the revision counter and keep the change log bounded to about ``keep``."""
        if not self.changed:
            return
        self.conn.execute("UPDATE meta SET value = ? WHERE name = 'revision'", (self.revision,))
        if keep is not None and self.revision - self.compacted > keep + compaction_slack(keep):
            self.compact_to(self.revision - keep)

    def _next_revision(self) -> int:
        self.revision += 1
        return self.revision

    def _log(self, rev: int, key: str, kind: int, value: str | None, prev: str | None) -> None:
        self.conn.execute(
            "INSERT INTO changes (revision, key, type, value, prev_value) VALUES (?, ?, ?, ?, ?)",
            (rev, key, kind, value, prev),
        )
