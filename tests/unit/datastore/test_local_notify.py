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
from calico.datastore.local.notify import ChangeNotifier, changed_names

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


def test_other_files_do_not_end_the_wait_and_the_database_does(tmp_path: Path) -> None:
    db = tmp_path / "calico.db"
    db.write_bytes(b"")
    notifier = ChangeNotifier(db)
    try:
        assert notifier.watching_files
        (tmp_path / "felix.log").write_text("noise")
        assert notifier.wait(0.2) is False
        result: list[bool] = []
        waiter = threading.Thread(target=lambda: result.append(notifier.wait(LONG_TICK)))
        waiter.start()
        with (tmp_path / "calico.db-wal").open("ab") as f:
            f.write(b"commit")
        waiter.join(30)
        assert result == [True]
        notifier.kick()
        assert notifier.wait(LONG_TICK) is True
    finally:
        notifier.close()
        notifier.close()  # idempotent: no fd is closed twice


names = st.lists(st.binary(min_size=1, max_size=40).filter(lambda b: b"\0" not in b), max_size=5)


@given(names)
def test_changed_names_reads_every_event(files: list[bytes]) -> None:
    buf = b""
    for i, name in enumerate(files):
        padded = name + b"\0" * (-(len(name) + 1) % 16 + 1)
        buf += struct.pack("=iIII", 1, 0x2, i, len(padded)) + padded
    assert changed_names(buf) == set(files)
