"""Backend conformance: every datastore behaves the same through the Backend protocol.

Revisions are compared, never assumed to start at 0 or to be consecutive (an etcd keyspace
shares its revision counter with everything else on the server).
"""

from __future__ import annotations

import json
import threading
import time

import procs
import pytest
from backend_cases import BackendCase

from calico.datastore import (
    Backend,
    EventType,
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
    RevisionCompactedError,
    UpdateConflictError,
    Watch,
    WatchEvent,
)

P = "/calico/resources/v3/projectcalico.org/ippools/"


def drain(watch: Watch, count: int, timeout: float = 5.0) -> list[WatchEvent]:
    """Exactly ``count`` events, failing if they do not arrive within ``timeout``."""
    events: list[WatchEvent] = []
    deadline = time.monotonic() + timeout
    while len(events) < count:
        event = watch.next(max(0.0, deadline - time.monotonic()))
        assert event is not None, f"only {len(events)} of {count} events arrived: {events}"
        events.append(event)
    return events


def summary(events: list[WatchEvent]) -> list[tuple[EventType, str, str | None]]:
    return [(e.type, e.key, e.value) for e in events]


# -- CRUD ---------------------------------------------------------------------------------------


def test_create_then_get(backend: Backend) -> None:
    created = backend.create(P + "pool1", '{"cidr": "10.0.0.0/16"}')
    assert created.key == P + "pool1"
    assert created.value == '{"cidr": "10.0.0.0/16"}'
    assert backend.get(P + "pool1") == created


def test_create_existing_key_fails(backend: Backend) -> None:
    first = backend.create(P + "pool1", "1")
    with pytest.raises(ResourceAlreadyExistsError) as info:
        backend.create(P + "pool1", "2")
    assert info.value.key == P + "pool1"
    assert backend.get(P + "pool1") == first


def test_get_missing_key_fails(backend: Backend) -> None:
    with pytest.raises(ResourceDoesNotExistError):
        backend.get(P + "nope")


def test_update_is_compare_and_swap(backend: Backend) -> None:
    first = backend.create(P + "pool1", "1")
    second = backend.update(P + "pool1", "2", first.revision)
    assert second.revision > first.revision
    assert backend.get(P + "pool1") == second
    with pytest.raises(UpdateConflictError):
        backend.update(P + "pool1", "3", first.revision)
    assert backend.get(P + "pool1").value == "2"
    with pytest.raises(ResourceDoesNotExistError):
        backend.update(P + "nope", "1", second.revision)


def test_apply_creates_and_overwrites(backend: Backend) -> None:
    first = backend.apply(P + "pool1", "1")
    second = backend.apply(P + "pool1", "2")
    assert second.revision > first.revision
    assert backend.get(P + "pool1") == second


def test_delete(backend: Backend) -> None:
    with pytest.raises(ResourceDoesNotExistError):
        backend.delete(P + "pool1")
    first = backend.create(P + "pool1", "1")
    second = backend.update(P + "pool1", "2", first.revision)
    with pytest.raises(UpdateConflictError):
        backend.delete(P + "pool1", first.revision)
    deleted = backend.delete(P + "pool1", second.revision)
    assert (deleted.key, deleted.value, deleted.revision) == (P + "pool1", "2", second.revision)
    with pytest.raises(ResourceDoesNotExistError):
        backend.get(P + "pool1")
    again = backend.create(P + "pool1", "3")  # a deleted key can be created again
    assert again.revision > second.revision
    backend.delete(P + "pool1")  # unconditional
    assert backend.list(P).kvs == []


def test_list_by_prefix_is_sorted_and_exact(backend: Backend, backend_case: BackendCase) -> None:
    names = backend_case.names
    for name in names:
        backend.create(P + name, json.dumps(name))
    backend.create(backend_case.foreign_key(P), "0")  # shares the prefix minus the slash
    listed = backend.list(P)
    assert [kv.key for kv in listed.kvs] == sorted(P + n for n in names)
    under_a = [P + n for n in ("a", "a-b", names[2], "ab")]
    assert [kv.key for kv in backend.list(P + "a").kvs] == under_a
    assert backend.list(P + "zzz").kvs == []
    assert listed.revision >= max(kv.revision for kv in listed.kvs)
    for kv in listed.kvs:
        assert backend.get(kv.key) == kv


def test_revisions_increase_with_every_write(backend: Backend) -> None:
    revisions = [backend.create(P + "a", "1").revision, backend.create(P + "b", "1").revision]
    revisions.append(backend.update(P + "a", "2", revisions[0]).revision)
    revisions.append(backend.apply(P + "b", "2").revision)
    backend.delete(P + "a")
    after_delete = backend.current_revision()
    assert revisions == sorted(set(revisions))
    assert after_delete > revisions[-1]
    assert backend.list(P).revision == after_delete
    assert backend.get(P + "b").revision == revisions[-1]  # a key keeps its last write's revision


# -- watch --------------------------------------------------------------------------------------


def test_watch_from_list_revision_sees_exactly_later_changes(
    backend: Backend, backend_case: BackendCase
) -> None:
    backend.create(P + "a", "1")
    b = backend.create(P + "b", "1")
    listed = backend.list(P)
    watch = backend.watch(P, listed.revision)
    try:
        backend.create(P + "c", "1")
        backend.update(P + "b", "2", b.revision)
        backend.delete(P + "a")
        backend.create(backend_case.foreign_key(P), "1")  # outside the prefix
        events = drain(watch, 3)
        assert summary(events) == [
            (EventType.ADDED, P + "c", "1"),
            (EventType.MODIFIED, P + "b", "2"),
            (EventType.DELETED, P + "a", None),
        ]
        assert all(e.revision > listed.revision for e in events)
        assert [e.revision for e in events] == sorted(e.revision for e in events)
        assert events[1].revision == backend.get(P + "b").revision
        assert watch.next(0.3) is None  # nothing else: no duplicates, no foreign keys
    finally:
        watch.stop()


def test_watch_from_old_revision_replays_history(backend: Backend) -> None:
    start = backend.current_revision()
    a = backend.create(P + "a", "1")
    backend.update(P + "a", "2", a.revision)
    backend.delete(P + "a")
    watch = backend.watch(P, start)
    try:
        assert summary(drain(watch, 3)) == [
            (EventType.ADDED, P + "a", "1"),
            (EventType.MODIFIED, P + "a", "2"),
            (EventType.DELETED, P + "a", None),
        ]
        assert watch.next(0.2) is None
    finally:
        watch.stop()

    middle = backend.watch(P, a.revision)  # from a revision in the middle of the history
    try:
        assert [e.type for e in drain(middle, 2)] == [EventType.MODIFIED, EventType.DELETED]
    finally:
        middle.stop()


def test_watch_stop_wakes_a_blocked_next(backend: Backend) -> None:
    watch = backend.watch(P, backend.current_revision())
    results: list[WatchEvent | None] = []
    reader = threading.Thread(target=lambda: results.append(watch.next()))
    reader.start()
    time.sleep(0.2)
    watch.stop()
    reader.join(timeout=2)
    assert not reader.is_alive() and results == [None]
    watch.stop()  # idempotent
    assert watch.next(0) is None


def test_watch_iterates_until_stopped(backend: Backend) -> None:
    watch = backend.watch(P, backend.current_revision())
    seen: list[str] = []

    def consume() -> None:
        for event in watch:
            seen.append(event.key)
            if len(seen) == 2:
                watch.stop()

    reader = threading.Thread(target=consume)
    reader.start()
    backend.create(P + "a", "1")
    backend.create(P + "b", "1")
    reader.join(timeout=5)
    assert not reader.is_alive() and seen == [P + "a", P + "b"]


def test_watch_behind_compaction_gets_too_old_error(
    backend: Backend, backend_case: BackendCase
) -> None:
    start = backend.current_revision()
    for i in range(4):
        backend.apply(P + "a", str(i))
    backend_case.compact(backend, backend.current_revision())
    watch = backend.watch(P, start)
    try:
        event = watch.next(5)
        assert event is not None and event.type is EventType.ERROR
        assert isinstance(event.error, RevisionCompactedError)
        assert "too old" in str(event.error)
        assert watch.next(0.2) is None  # the ERROR is the last event
    finally:
        watch.stop()
    # Relisting and watching from the list revision works again.
    listed = backend.list(P)
    assert [kv.value for kv in listed.kvs] == ["3"]
    fresh = backend.watch(P, listed.revision)
    try:
        backend.apply(P + "a", "4")
        assert summary(drain(fresh, 1)) == [(EventType.MODIFIED, P + "a", "4")]
    finally:
        fresh.stop()


def test_ttl_key_expires_with_a_deleted_event(backend: Backend, backend_case: BackendCase) -> None:
    if not backend_case.has_ttl:
        pytest.skip(f"{backend_case.kind}: no TTLs (Kubernetes objects have no leases)")
    watch = backend.watch(P, backend.current_revision())
    try:
        created = backend.create(P + "lease", "1", ttl=backend_case.ttl)
        backend.create(P + "forever", "1")
        assert backend.get(P + "lease").value == "1"
        events = drain(watch, 3, timeout=backend_case.expiry_wait + 1)
        assert summary(events) == [
            (EventType.ADDED, P + "lease", "1"),
            (EventType.ADDED, P + "forever", "1"),
            (EventType.DELETED, P + "lease", None),
        ]
        assert events[2].revision > created.revision
        with pytest.raises(ResourceDoesNotExistError):
            backend.get(P + "lease")
        assert [kv.key for kv in backend.list(P).kvs] == [P + "forever"]
        backend.create(P + "lease", "2")  # the name is free again
    finally:
        watch.stop()


def test_reads_never_return_expired_keys(backend: Backend, backend_case: BackendCase) -> None:
    if not backend_case.has_ttl:
        pytest.skip(f"{backend_case.kind}: no TTLs (Kubernetes objects have no leases)")
    backend.create(P + "lease", "1", ttl=backend_case.ttl)
    deadline = time.monotonic() + backend_case.expiry_wait
    while time.monotonic() < deadline:
        try:
            backend.get(P + "lease")
        except ResourceDoesNotExistError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("TTL key never expired")
    assert backend.list(P).kvs == []


# -- many clients and processes -----------------------------------------------------------------


def test_second_client_sees_writes_and_conflicts(
    backend: Backend, backend_case: BackendCase
) -> None:
    other = backend_case.open()
    first = backend.create(P + "a", "1")
    assert other.get(P + "a") == first
    other.update(P + "a", "2", first.revision)
    with pytest.raises(UpdateConflictError):
        backend.update(P + "a", "3", first.revision)


def test_cas_conflict_between_processes(backend: Backend, backend_case: BackendCase) -> None:
    first = backend.create(P + "a", '"mine"')
    won = procs.run(backend_case.spec, "update", P + "a", str(first.revision), '"theirs"')
    assert won["ok"] and won["revision"] > first.revision
    with pytest.raises(UpdateConflictError):
        backend.update(P + "a", '"mine again"', first.revision)
    lost = procs.run(backend_case.spec, "update", P + "a", str(first.revision), '"stale"')
    assert lost == {"ok": False, "error": "UpdateConflictError"}
    assert backend.get(P + "a").value == '"theirs"'


def test_watch_sees_a_change_made_by_another_process(
    backend: Backend, backend_case: BackendCase
) -> None:
    watch = backend.watch(P, backend.current_revision())
    try:
        result = procs.run(backend_case.spec, "apply", P + "remote", '"hello"')
        event = drain(watch, 1)[0]
        assert (event.type, event.key, event.value) == (EventType.ADDED, P + "remote", '"hello"')
        assert event.revision == result["revision"]
    finally:
        watch.stop()


def test_concurrent_processes_lose_no_update(backend: Backend, backend_case: BackendCase) -> None:
    """20 processes run CAS increment loops on one counter; every increment lands, once."""
    workers, increments = 20, 15
    key = P + "counter"
    start = backend.create(key, "0")
    watch = backend.watch(key, start.revision)
    children = [
        procs.spawn(backend_case.spec, "counter", key, str(increments)) for _ in range(workers)
    ]
    try:
        for child in children:
            procs.wait_ready(child)
        for child in children:  # release them together
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        conflicts = 0
        for child in children:
            out, err = child.communicate(timeout=60)
            assert child.returncode == 0, err
            conflicts += json.loads(out.strip().splitlines()[-1])["conflicts"]
        total = workers * increments
        final = backend.get(key)
        assert json.loads(final.value) == total
        events = drain(watch, total, timeout=10)
        assert [json.loads(e.value or "null") for e in events] == list(range(1, total + 1))
        assert events[-1].revision == final.revision
        assert watch.next(0.2) is None
    finally:
        watch.stop()
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
