"""The local watch poller wakes on writes to the database file, not on its tick alone."""

from __future__ import annotations

import struct
import subprocess
import sys
import threading
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from calico.datastore import EventType
from calico.datastore.local import LocalBackend
from calico.datastore.local.notify import ChangeNotifier, parse_events

# A tick far longer than any wait below: an event arriving at all proves the early wake-up.
LONG_TICK = 600.0


def test_commit_by_another_process_wakes_the_watch(tmp_path: Path) -> None:
    path = tmp_path / "calico.db"
    with LocalBackend(path, poll_interval=LONG_TICK) as backend:
        watch = backend.watch("/", backend.current_revision())
        assert watch.next(0.2) is None  # the poller is now idle in its (long) wait
        code = (
            "import sys; from calico.datastore.local import LocalBackend\n"
            "with LocalBackend(sys.argv[1]) as b: b.create('/from-other', 'v')\n"
        )
        subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=60)
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
