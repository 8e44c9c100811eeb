"""One LocalBackend shared by many threads (felix, confd and the CNI plugin all use threads)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from calico.datastore import EventType, UpdateConflictError
from calico.datastore.local import LocalBackend


def test_threads_doing_cas_increments_lose_no_update(tmp_path: Path) -> None:
    threads, increments = 8, 50
    with LocalBackend(tmp_path / "calico.db") as backend:
        start = backend.create("/counter", "0")
        watch = backend.watch("/counter", start.revision)
        errors: list[BaseException] = []

        def work() -> None:
            try:
                for _ in range(increments):
                    while True:
                        kv = backend.get("/counter")
                        try:
                            backend.update("/counter", str(int(kv.value) + 1), kv.revision)
                            break
                        except UpdateConflictError:
                            pass
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=work) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
        assert errors == []
        total = threads * increments
        assert json.loads(backend.get("/counter").value) == total
        values = [int(e.value or 0) for e in (watch.next(5) for _ in range(total)) if e]
        assert values == list(range(1, total + 1))
        watch.stop()


def test_many_watches_share_one_poller_and_each_sees_its_prefix(tmp_path: Path) -> None:
    with LocalBackend(tmp_path / "calico.db") as backend:
        rev = backend.current_revision()
        watches = {p: backend.watch(p, rev) for p in ("/a/", "/b/", "/")}
        writer = threading.Thread(
            target=lambda: [backend.apply(f"/{p}/{i}", "1") for i in range(20) for p in "ab"]
        )
        writer.start()
        writer.join()
        got = {p: [w.next(2) for _ in range(40 if p == "/" else 20)] for p, w in watches.items()}
        for prefix, events in got.items():
            assert all(e is not None and e.key.startswith(prefix) for e in events)
            assert watches[prefix].next(0.1) is None
        assert [e.key for e in got["/"] if e] == [f"/{p}/{i}" for i in range(20) for p in "ab"]


def test_close_stops_blocked_watches(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "calico.db")
    watch = backend.watch("/", 0)
    results: list[object] = []
    reader = threading.Thread(target=lambda: results.append(watch.next()))
    reader.start()
    time.sleep(0.1)
    backend.close()
    reader.join(timeout=2)
    assert not reader.is_alive() and results == [None]


def test_local_writes_reach_watchers_quickly(tmp_path: Path) -> None:
    """In-process writes kick the poller instead of waiting for the next poll."""
    # A poll interval far beyond the wait: the event can only arrive in time through the kick.
    with LocalBackend(tmp_path / "calico.db", poll_interval=60.0) as backend:
        watch = backend.watch("/", backend.current_revision())
        time.sleep(0.05)  # let the poller reach its wait (if it has not, the test is only weaker)
        backend.create("/k", "1")
        event = watch.next(20)
        assert event is not None and event.type is EventType.ADDED


def test_many_openers_of_a_new_file_race_safely(tmp_path: Path) -> None:
    """Separate connections initialising one fresh file at once (as processes at boot do)."""
    path = tmp_path / "new" / "calico.db"
    opened: list[LocalBackend] = []
    errors: list[BaseException] = []

    def open_and_write(i: int) -> None:
        try:
            backend = LocalBackend(path)
            opened.append(backend)
            backend.create(f"/k/{i}", "1")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_and_write, args=(i,)) for i in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    assert len(opened[0].list("/k/").kvs) == 10
    for backend in opened:
        backend.close()
