"""The local watch poller wakes on writes to the database file, not on its tick alone."""

from __future__ import annotations

import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.datastore import EventType
from calico.datastore.local import LocalBackend, notify
from calico.datastore.local import watch as local_watch
from calico.datastore.local.notify import ChangeNotifier, parse_events

# A tick far longer than any wait below: an event arriving at all proves the early wake-up.
LONG_TICK = 600.0


def create_in_another_process(path: Path, key: str, ttl: float | None = None) -> None:
    """Create ``key`` in the database at ``path`` from a separate Python process: only the
    file system can tell this process's poller about that commit."""
    code = (
        "import sys; from calico.datastore.local import LocalBackend\n"
        "ttl = float(sys.argv[3]) if len(sys.argv) > 3 else None\n"
        "with LocalBackend(sys.argv[1]) as b: b.create(sys.argv[2], 'v', ttl=ttl)\n"
    )
    args = [str(path), key] + ([] if ttl is None else [str(ttl)])
    subprocess.run([sys.executable, "-c", code, *args], check=True, timeout=60)


def test_commit_by_another_process_wakes_the_watch(tmp_path: Path) -> None:
    path = tmp_path / "calico.db"
    with LocalBackend(path, poll_interval=LONG_TICK) as backend:
        watch = backend.watch("/", backend.current_revision())
        assert watch.next(0.2) is None  # the poller is now idle in its (long) wait
        create_in_another_process(path, "/from-other")
        event = watch.next(30)
        assert event is not None and event.type is EventType.ADDED
        assert event.key == "/from-other"
        watch.stop()


def _woken_by_write(notifier: ChangeNotifier, path: Path) -> bool:
    """Writes ``path`` every 50 ms (so one lands while the waiter is in its wait) for up to
    10 s; True if one of them ended the wait (a kick that frees a stuck waiter never counts)."""
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(notifier.wait(LONG_TICK)))
    waiter.start()
    for _ in range(200):
        with path.open("ab") as f:
            f.write(b"commit")
        waiter.join(0.05)
        if result:
            return result == [True]
    notifier.kick()
    waiter.join(30)
    return False


def test_other_files_do_not_end_the_wait_and_the_database_does(tmp_path: Path) -> None:
    db, wal = tmp_path / "calico.db", tmp_path / "calico.db-wal"
    db.write_bytes(b"")
    wal.write_bytes(b"")
    notifier = ChangeNotifier(db)
    try:
        assert notifier.watching_files
        (tmp_path / "felix.log").write_text("noise")
        (tmp_path / "calico.db-shm").write_text("mmapped, never written by commits")
        assert notifier.wait(0.2) is False
        assert _woken_by_write(notifier, wal)
        assert _woken_by_write(notifier, db)  # a checkpoint
        notifier.kick()
        assert notifier.wait(LONG_TICK) is True
    finally:
        notifier.close()
        notifier.close()  # idempotent: no fd is closed twice


def test_a_wal_that_appears_or_is_replaced_later_is_watched(tmp_path: Path) -> None:
    db, wal = tmp_path / "calico.db", tmp_path / "calico.db-wal"
    db.write_bytes(b"")
    notifier = ChangeNotifier(db)
    try:
        assert notifier.wait(0.05) is False
        wal.write_bytes(b"")  # the first connection makes it
        assert _woken_by_write(notifier, wal)
        wal.unlink()  # the last connection closed; a new one makes it again
        wal.write_bytes(b"")
        notifier.wait(0.05)  # sees the old watch go
        assert _woken_by_write(notifier, wal)
    finally:
        notifier.close()


@given(st.lists(st.tuples(st.integers(1, 99), st.integers(0, 0xFFFF), st.binary(max_size=30))))
def test_parse_events_reads_every_event(events: list[tuple[int, int, bytes]]) -> None:
    buf = b""
    for i, (wd, mask, name) in enumerate(events):
        padded = name + b"\0" * (-len(name) % 16)
        buf += struct.pack("=iIII", wd, mask, i, len(padded)) + padded
    assert parse_events(buf) == [(wd, mask) for wd, mask, _ in events]


def _timed_wait(notifier: ChangeNotifier, timeout: float, reliable_timeout: float) -> float:
    start = time.monotonic()
    assert notifier.wait(timeout, reliable_timeout=reliable_timeout) is False
    return time.monotonic() - start


def test_the_long_wait_needs_both_files_watched_on_a_local_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, wal = tmp_path / "calico.db", tmp_path / "calico.db-wal"
    db.write_bytes(b"")
    notifier = ChangeNotifier(db)
    try:
        assert not notifier.reliable  # no -wal yet: a commit could go unseen
        assert _timed_wait(notifier, 0.01, LONG_TICK) < 5
        wal.write_bytes(b"")
        assert notifier.wait(LONG_TICK, reliable_timeout=LONG_TICK) is True  # watch added
        assert notifier.reliable
        assert _timed_wait(notifier, 0.01, 0.3) >= 0.25
    finally:
        notifier.close()
    with monkeypatch.context() as m:  # e.g. NFS: another host's commits make no event here
        m.setattr(notify, "LOCAL_FS_TYPES", frozenset())
        notifier = ChangeNotifier(db)
        try:
            assert notifier.watching_files and not notifier.reliable
            assert _timed_wait(notifier, 0.01, LONG_TICK) < 5
        finally:
            notifier.close()


def test_a_lost_watch_ends_the_wait(tmp_path: Path) -> None:
    db, wal = tmp_path / "calico.db", tmp_path / "calico.db-wal"
    db.write_bytes(b"")
    wal.write_bytes(b"")
    notifier = ChangeNotifier(db)
    try:
        assert notifier.reliable
        result: list[bool] = []
        waiter = threading.Thread(
            target=lambda: result.append(notifier.wait(LONG_TICK, reliable_timeout=LONG_TICK))
        )
        waiter.start()
        time.sleep(0.05)
        wal.unlink()  # replaced: a commit to the new file would make no event on the old watch
        waiter.join(10)
        assert result == [True]
        assert not notifier.reliable
        wal.write_bytes(b"")
        assert notifier.wait(LONG_TICK, reliable_timeout=LONG_TICK) is True  # watched again
        assert notifier.reliable and _woken_by_write(notifier, wal)
    finally:
        notifier.close()


def test_filesystem_type_of_a_temp_dir_is_known() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    assert notify.filesystem_type(libc, b"/proc") == 0x9FA0  # PROC_SUPER_MAGIC
    assert notify.filesystem_type(libc, b"/nonexistent/path") is None


def test_a_ttl_key_written_by_another_process_expires_on_time_for_a_watch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The poller's long idle wait still ends at the next expiry: nothing writes then."""
    monkeypatch.setattr(local_watch, "NOTIFIED_TICK", LONG_TICK)
    path = tmp_path / "calico.db"
    with LocalBackend(path) as backend:
        watch = backend.watch("/", backend.current_revision())
        create_in_another_process(path, "/lease", ttl=0.3)
        added = watch.next(30)
        assert added is not None and added.type is EventType.ADDED
        start = time.monotonic()
        deleted = watch.next(30)
        assert deleted is not None and (deleted.type, deleted.key) == (EventType.DELETED, "/lease")
        assert time.monotonic() - start < 10  # at the expiry, not after the 10-minute tick
        watch.stop()


def test_a_wake_up_that_finds_no_new_version_keeps_the_short_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's wal-index header lands after its last -wal write: the poller looks again
    after SETTLE_FIRST (a quarter of a millisecond, not the 2 ms tick), then doubles the wait,
    rather than waiting for the long one."""
    waits: list[float | None] = []
    original = ChangeNotifier.wait

    def recording(self: ChangeNotifier, timeout: float, **kw: float | None) -> bool:
        waits.append(kw.get("reliable_timeout"))
        return original(self, timeout, **kw)

    monkeypatch.setattr(ChangeNotifier, "wait", recording)
    with LocalBackend(tmp_path / "calico.db") as backend:
        watch = backend.watch("/", backend.current_revision())
        backend.create("/k", "v")  # makes the -wal, then the poller watches both files
        assert watch.next(10) is not None
        time.sleep(0.3)
        notifier = backend._poller._notifier  # type: ignore[attr-defined]
        assert notifier is not None and notifier.reliable
        waits.clear()
        notifier.kick()  # an early wake-up with nothing new, as when racing the writer
        time.sleep(0.3)
        assert local_watch.SETTLE_FIRST == 0.00025
        assert waits[:5] == pytest.approx([0.00025, 0.0005, 0.001, 0.002, 0.004])
        assert local_watch.NOTIFIED_TICK in waits  # and back to the long wait
        watch.stop()
