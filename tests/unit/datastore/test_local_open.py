"""Opening the local datastore file: permissions, schema, and refusing files it must not touch."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from calico.datastore import (
    Backend,
    ConnectionFailedError,
    DatastoreError,
    ResourceDoesNotExistError,
    Watch,
)
from calico.datastore.local import LocalBackend
from calico.datastore.local.schema import SCHEMA_VERSION


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_creates_parent_dirs_and_a_0600_file(tmp_path: Path) -> None:
    path = tmp_path / "var" / "lib" / "calico" / "calico.db"
    old_umask = os.umask(0)  # the 0600 must not depend on the caller's umask
    try:
        with LocalBackend(path) as backend:
            backend.create("/k", "1")
            for suffix in ("", "-wal", "-shm"):
                assert mode(Path(f"{path}{suffix}")) == 0o600, suffix
    finally:
        os.umask(old_umask)


def test_schema_is_initialised_and_versioned(tmp_path: Path) -> None:
    path = tmp_path / "calico.db"
    LocalBackend(path).close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
        assert versions == list(range(1, SCHEMA_VERSION + 1))
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"meta", "kv", "changes", "schema_migrations"} <= tables
    finally:
        conn.close()


def test_data_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "calico.db"
    with LocalBackend(path) as backend:
        created = backend.create("/k", '{"a": 1}')
    with LocalBackend(path) as backend:
        assert backend.get("/k") == created
        assert backend.current_revision() == created.revision


def test_corrupted_file_is_an_error_naming_the_path_and_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "calico.db"
    garbage = b"this is not a database" * 100
    path.write_bytes(garbage)
    with pytest.raises(ConnectionFailedError) as info:
        LocalBackend(path)
    assert str(info.value).startswith(f"cannot open local datastore {path}: ")
    assert "not a database" in str(info.value)
    assert path.read_bytes() == garbage


def test_foreign_sqlite_database_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE precious (x)")
    conn.commit()
    conn.close()
    with pytest.raises(ConnectionFailedError, match="not a calico datastore"):
        LocalBackend(path)
    conn = sqlite3.connect(path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    conn.close()
    assert tables == ["precious"]


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "calico.db"
    LocalBackend(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_migrations VALUES (?, 0)", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(ConnectionFailedError, match="newer than this release supports"):
        LocalBackend(path)


def test_path_that_is_a_directory_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConnectionFailedError, match=str(tmp_path)):
        LocalBackend(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_is_an_error_naming_the_path(tmp_path: Path) -> None:
    path = tmp_path / "calico.db"
    LocalBackend(path).close()
    path.chmod(0)
    with pytest.raises(ConnectionFailedError, match=str(path)):
        LocalBackend(path)


def test_closed_backend_says_so(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "calico.db")
    backend.close()
    backend.close()  # idempotent
    with pytest.raises(DatastoreError, match="closed"):
        backend.get("/k")
    with pytest.raises(DatastoreError, match="closed"):
        backend.watch("/", 0)


def test_missing_key_after_open(tmp_path: Path) -> None:
    with LocalBackend(tmp_path / "calico.db") as backend, pytest.raises(ResourceDoesNotExistError):
        backend.get("/nope")


def test_implements_the_backend_and_watch_protocols(tmp_path: Path) -> None:
    with LocalBackend(tmp_path / "calico.db") as backend:
        assert isinstance(backend, Backend)
        watch = backend.watch("/", 0)
        assert isinstance(watch, Watch)
        watch.stop()
