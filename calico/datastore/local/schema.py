"""The local datastore's schema and its migrations.

``schema_migrations`` records every applied version, so a later release can add a migration to
``MIGRATIONS`` and old files upgrade in place. A file written by a newer release, or a SQLite file
that is not a calico datastore at all, is refused rather than modified.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from calico.datastore.errors import ConnectionFailedError

# meta rows: ``revision`` (global counter, the last revision written) and ``compacted`` (history
# at or below it is gone). kv.expires_at is wall-clock seconds (processes share no monotonic clock).
# changes.type: 1 added, 2 modified, 3 deleted.
_V1 = (
    "CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID",
    "INSERT INTO meta (name, value) VALUES ('revision', 0), ('compacted', 0)",
    """CREATE TABLE kv (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        revision INTEGER NOT NULL,
        create_revision INTEGER NOT NULL,
        ttl REAL,
        expires_at REAL
    ) WITHOUT ROWID""",
    "CREATE INDEX kv_expiry ON kv (expires_at) WHERE expires_at IS NOT NULL",
    """CREATE TABLE changes (
        revision INTEGER PRIMARY KEY,
        key TEXT NOT NULL,
        type INTEGER NOT NULL,
        value TEXT,
        prev_value TEXT
    )""",
)

MIGRATIONS: list[tuple[int, tuple[str, ...]]] = [(1, _V1)]
SCHEMA_VERSION = MIGRATIONS[-1][0]


def current_version(conn: sqlite3.Connection, path: Path) -> int:
    """The applied schema version; 0 for an empty file. Refuses foreign databases."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "schema_migrations" not in tables:
        if tables:
            raise ConnectionFailedError(
                f"cannot open local datastore {path}: not a calico datastore "
                f"(it has tables {sorted(tables)} but no schema_migrations)"
            )
        return 0
    return conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0]


def migrate(conn: sqlite3.Connection, path: Path) -> int:
    """Bring the schema up to SCHEMA_VERSION inside one write transaction; returns the version.

    Runs in every process that opens the file; BEGIN IMMEDIATE makes exactly one of them do it.
    An up-to-date file (the usual case) is recognised by a plain read first, so opening it
    never queues for the write lock behind other processes' writes.
    """
    version = current_version(conn, path)
    if version == SCHEMA_VERSION:
        return version
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = current_version(conn, path)
        if version > SCHEMA_VERSION:
            raise ConnectionFailedError(
                f"cannot open local datastore {path}: schema version {version} is newer than "
                f"this release supports ({SCHEMA_VERSION}); upgrade calico"
            )
        if version == 0:
            conn.execute(
                "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at REAL)"
            )
        for target, statements in MIGRATIONS:
            if target <= version:
                continue
            for statement in statements:
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?)", (target, time.time()))
            version = target
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return version
