"""The change log: automatic and explicit compaction, TTL sweeping, key ranges, validation."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from calico.datastore import (
    DatastoreError,
    EventType,
    InvalidValueError,
    ResourceDoesNotExistError,
    RevisionCompactedError,
)
from calico.datastore.local import LocalBackend
from calico.datastore.local.store import prefix_end
from calico.datastore.local.txn import compaction_slack
from calico.datastore.local.watch import FETCH_BATCH


def log_bounds(path: Path) -> tuple[int, int]:
    """(rows in the change log, compaction point)."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT count(*) FROM changes").fetchone()[0]
        compacted = conn.execute("SELECT value FROM meta WHERE name='compacted'").fetchone()[0]
        return rows, compacted
    finally:
        conn.close()


def test_automatic_compaction_keeps_the_log_bounded(tmp_path: Path) -> None:
    path = tmp_path / "calico.db"
    keep = 50
    with LocalBackend(path, compaction_keep=keep) as backend:
        for i in range(1000):
            backend.apply(f"/k{i % 7}", str(i))
            rows, _ = log_bounds(path) if i % 97 == 0 else (0, 0)
            assert rows <= keep + compaction_slack(keep)
        rows, compacted = log_bounds(path)
        assert keep <= rows <= keep + compaction_slack(keep)
        assert compacted == backend.current_revision() - rows
        event = backend.watch("/", 0).next(2)
        assert event is not None and isinstance(event.error, RevisionCompactedError)
        recent = backend.watch("/", compacted)
        assert [e.revision for e in [recent.next(2)]] == [compacted + 1]
        recent.stop()


def test_explicit_compaction(tmp_path: Path) -> None:
    path = tmp_path / "calico.db"
    with LocalBackend(path) as backend:
        for i in range(10):
            backend.apply("/k", str(i))
        backend.compact(4)
        assert log_bounds(path) == (6, 4)
        backend.compact(2)  # already compacted further: a no-op
        assert log_bounds(path) == (6, 4)
        with pytest.raises(DatastoreError, match="only at revision 10"):
            backend.compact(11)
        event = backend.watch("/", 3).next(2)
        assert event is not None and event.type is EventType.ERROR
        assert isinstance(event.error, RevisionCompactedError)
        assert (event.error.revision, event.error.compacted) == (3, 4)
        assert backend.get("/k").value == "9"  # compaction never touches live keys


def test_expired_keys_are_swept_by_the_next_write_without_any_watcher(tmp_path: Path) -> None:
    with LocalBackend(tmp_path / "calico.db") as backend:
        lease = backend.create("/lease", "1", ttl=0.1)
        time.sleep(0.15)
        with pytest.raises(ResourceDoesNotExistError):
            backend.get("/lease")
        created = backend.create("/lease", "2")  # the sweep frees the name first
        history = backend.watch("/", lease.revision)
        events = [history.next(2), history.next(2)]
        history.stop()
        assert [(e.type, e.key) for e in events if e] == [
            (EventType.DELETED, "/lease"),
            (EventType.ADDED, "/lease"),
        ]
        assert created.revision == lease.revision + 2


def test_list_revision_covers_expiry_deletions(tmp_path: Path) -> None:
    with LocalBackend(tmp_path / "calico.db") as backend:
        lease = backend.create("/lease", "1", ttl=0.1)
        time.sleep(0.15)
        listed = backend.list("/")
        assert listed.kvs == [] and listed.revision == lease.revision + 1


def test_update_without_ttl_clears_the_expiry(tmp_path: Path) -> None:
    with LocalBackend(tmp_path / "calico.db") as backend:
        lease = backend.create("/lease", "1", ttl=0.2)
        assert lease.ttl == 0.2
        kept = backend.update("/lease", "2", lease.revision)
        time.sleep(0.3)
        assert backend.get("/lease") == kept and kept.ttl is None


@pytest.mark.parametrize(
    ("prefix", "end"),
    [("", None), ("/a", "/b"), ("/a/", "/a0"), ("x\U0010ffff", "y"), ("\ud7ff", "\ue000")],
)
def test_prefix_end(prefix: str, end: str | None) -> None:
    assert prefix_end(prefix) == end


def test_non_ascii_keys_list_by_prefix(tmp_path: Path) -> None:
    with LocalBackend(tmp_path / "calico.db") as backend:
        for key in ("/é", "/é/x", "/éa", "/f", "/\U0001f600"):
            backend.create(key, "1")
        assert [kv.key for kv in backend.list("/é").kvs] == ["/é", "/é/x", "/éa"]
        assert [kv.key for kv in backend.list("/").kvs] == sorted(
            ["/é", "/é/x", "/éa", "/f", "/\U0001f600"]
        )


@pytest.mark.parametrize(
    ("key", "value", "ttl"),
    [
        ("", "1", None),
        ("/k", b"1", None),
        ("/k", "1", 0),
        ("/k", "1", -1.0),
        ("/\ud800", "1", None),
    ],
)
def test_invalid_input_is_rejected(tmp_path: Path, key: str, value: str, ttl: float) -> None:
    with LocalBackend(tmp_path / "calico.db") as backend, pytest.raises(InvalidValueError):
        backend.create(key, value, ttl)


def test_long_backlog_is_delivered_in_order_exactly_once(tmp_path: Path) -> None:
    total = FETCH_BATCH * 2 + 17
    with LocalBackend(tmp_path / "calico.db", compaction_keep=total * 2) as backend:
        start = backend.current_revision()
        last = backend.apply_many((f"/k/{i:06d}", str(i)) for i in range(total))
        assert last == start + total
        watch = backend.watch("/k/", start)
        revisions = []
        # Read until the last write arrives (a generous per-event wait for a loaded machine),
        # then check nothing follows it: order, no gaps, no duplicates.
        while revisions[-1:] != [last] and (event := watch.next(10.0)) is not None:
            revisions.append(event.revision)
        assert watch.next(0.2) is None
        assert revisions == list(range(start + 1, last + 1))
        watch.stop()
