"""The local watch poller's wake-ups: inotify on the database's files, kicks, the fallback."""

from __future__ import annotations

import logging
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.datastore.backend import EventType
from calico.datastore.local import LocalBackend
from calico.datastore.local import watch as watch_mod
from calico.datastore.local.wake import IN_MODIFY, Waker, parse_events

WRITE = """
import sys
from calico.datastore.local import LocalBackend
with LocalBackend(sys.argv[1]) as b:
    b.apply(sys.argv[2], sys.argv[3])
"""


def encode(events: list[tuple[int, bytes, int]]) -> bytes:
    """``struct inotify_event`` records as the kernel lays them out (name NUL-padded)."""
    out = b""
    for mask, name, pad in events:
        body = name + b"\0" * pad if name or pad else b""
        out += struct.pack("iIII", 1, mask, 0, len(body)) + body
    return out


names = st.binary(min_size=0, max_size=40).map(lambda b: b.replace(b"\0", b"x"))


@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), names, st.integers(0, 8)), max_size=20))
def test_parse_events_inverts_the_kernel_layout(events: list[tuple[int, bytes, int]]) -> None:
    assert parse_events(encode(events)) == [(m, n) for m, n, _ in events]


def test_parse_events_rejects_truncated_records() -> None:
    data = encode([(IN_MODIFY, b"calico.db-wal", 3)])
    with pytest.raises(ValueError, match="truncated inotify event name"):
        parse_events(data[:-1])
    with pytest.raises(ValueError, match="truncated inotify event header at offset 0"):
        parse_events(data[:10])


def test_waker_reports_only_the_database_files(tmp_path: Path) -> None:
    waker = Waker(tmp_path / "calico.db")
    try:
        assert not waker.unreliable
        (tmp_path / "other.log").write_text("noise")
        assert waker.wait(0) is False  # another file in the directory is not a wake
        (tmp_path / "calico.db-wal").write_text("frames")
        assert waker.wait(5) is True
        assert waker.wait(0) is False  # drained
        waker.kick()
        assert waker.wait(5) is False  # a kick wakes, but is not a write
    finally:
        waker.close()
    waker.kick()  # after close: ignored, no error


def _write_in_another_process(path: Path, key: str, value: str) -> None:
    subprocess.run([sys.executable, "-c", WRITE, str(path), key, value], check=True, timeout=60)


def test_other_process_commit_is_delivered_by_inotify_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the poll interval and the idle safety check both at an hour, only the inotify wake
    can deliver another process's commit."""
    monkeypatch.setattr(watch_mod, "IDLE_CHECK", 3600.0)
    path = tmp_path / "calico.db"
    with LocalBackend(path, poll_interval=3600.0) as backend:
        watch = backend.watch("/k/", backend.current_revision())
        for i in range(3):
            _write_in_another_process(path, f"/k/{i}", str(i))
            event = watch.next(30)
            assert event is not None and (event.type, event.key) == (EventType.ADDED, f"/k/{i}")
        watch.stop()


def test_without_inotify_the_poll_interval_applies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_init = Waker.__init__

    def no_inotify(self: Waker, db_path: Path) -> None:
        real_init(self, db_path)
        if self._inotify_fd >= 0:
            import os

            os.close(self._inotify_fd)
            self._inotify_fd = -1
        self.unreliable = True

    monkeypatch.setattr(Waker, "__init__", no_inotify)
    monkeypatch.setattr(watch_mod, "IDLE_CHECK", 3600.0)
    path = tmp_path / "calico.db"
    with LocalBackend(path, poll_interval=0.01) as backend:
        watch = backend.watch("/", backend.current_revision())
        _write_in_another_process(path, "/a", "1")
        event = watch.next(30)
        assert event is not None and event.key == "/a"


def test_unannounced_commit_switches_to_polling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A commit found by the idle check with no inotify event for it (as on a filesystem
    without inotify) makes the poller distrust inotify and poll from then on."""
    made: list[Waker] = []
    real_init = Waker.__init__

    def deaf(self: Waker, db_path: Path) -> None:
        real_init(self, db_path)
        self._names = set()  # hears nothing about the database
        made.append(self)

    monkeypatch.setattr(Waker, "__init__", deaf)
    monkeypatch.setattr(watch_mod, "IDLE_CHECK", 0.05)
    path = tmp_path / "calico.db"
    caplog.set_level(logging.WARNING, logger="calico.datastore.local.watch")
    with LocalBackend(path, poll_interval=0.01) as backend:
        watch = backend.watch("/", backend.current_revision())
        assert watch.next(0.2) is None  # the poller has taken its first look
        assert made and not made[0].unreliable
        _write_in_another_process(path, "/a", "1")
        event = watch.next(30)
        assert event is not None and event.key == "/a"
        assert made[0].unreliable
        assert "without an inotify event" in caplog.text
        monkeypatch.setattr(watch_mod, "IDLE_CHECK", 3600.0)  # now only the interval can help
        _write_in_another_process(path, "/b", "2")
        event = watch.next(30)
        assert event is not None and event.key == "/b"


def test_close_wakes_an_idle_poller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch_mod, "IDLE_CHECK", 3600.0)
    backend = LocalBackend(tmp_path / "calico.db", poll_interval=3600.0)
    watch = backend.watch("/", 0)
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(watch.next()))
    reader.start()
    backend.close()  # joins the poller thread: returns only if the kick woke it
    reader.join(30)
    assert got == [None]
    assert backend._poller._thread is not None and not backend._poller._thread.is_alive()
