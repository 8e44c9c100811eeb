"""Typha's snapshot cache: breadcrumbs, no-op skipping, deletes, batch-end status, COW."""

from __future__ import annotations

import time

import msgpack
import pytest

from calico.model import GlobalConfigKey, WorkloadEndpointKey
from calico.model.values import decode_value
from calico.syncer.api import SyncStatus, Update, UpdateType
from calico.typha.snapcache import Breadcrumb, SnapshotCache
from calico.typha.validation import validate_and_serialize


def cfg(name: str, value: str, rev: str = "1", ut: UpdateType = UpdateType.NEW) -> Update:
    return Update(GlobalConfigKey(name), value, rev, ut)


def delete(name: str, rev: str = "9") -> Update:
    return Update(GlobalConfigKey(name), None, rev, UpdateType.DELETED)


def chain(first: Breadcrumb) -> list[Breadcrumb]:
    out, c = [], first.next
    while c is not None:
        out.append(c)
        c = c.next
    return out


def snapshot(crumb: Breadcrumb) -> dict[str, object]:
    return {e.path: msgpack.unpackb(e.value_bytes) for e in crumb.snapshot_entries()}


def deltas(crumb: Breadcrumb) -> list[tuple[str, int]]:
    return [(e.path, e.update_type) for e in crumb.deltas]


@pytest.fixture
def cache() -> SnapshotCache:
    c = SnapshotCache("felix", max_batch_size=3)
    return c


def drive(cache: SnapshotCache, *items: list[Update] | SyncStatus) -> list[Breadcrumb]:
    """Queue everything, then run the cache thread until it has consumed it all."""
    first = cache.current()
    for item in items:
        if isinstance(item, SyncStatus):
            cache.on_status_updated(item)
        else:
            cache.on_updates(item)
    cache.start()
    cache.stop()
    return chain(first)


def test_first_crumb_is_empty_and_waiting(cache: SnapshotCache) -> None:
    c = cache.current()
    assert (c.seq, c.size, c.status, c.deltas) == (0, 0, SyncStatus.WAIT_FOR_DATASTORE, [])


def test_in_sync_is_only_on_the_last_chunk_of_a_batch(cache: SnapshotCache) -> None:
    updates = [cfg(f"k{i}", "v") for i in range(4)]
    crumbs = drive(cache, [updates[0]], SyncStatus.IN_SYNC, updates[1:])
    # one batch (1 + the status + 3 >= max_batch_size 3), minted in chunks of 3 updates: the
    # status lands on the last chunk only, after every update of the batch
    assert [len(c.deltas) for c in crumbs] == [3, 1]
    assert [c.status for c in crumbs] == [SyncStatus.WAIT_FOR_DATASTORE, SyncStatus.IN_SYNC]
    assert [c.seq for c in crumbs] == [1, 2]
    assert crumbs[-1].size == 4


def test_a_batch_stops_slurping_at_max_batch_size(cache: SnapshotCache) -> None:
    crumbs = drive(cache, [cfg("a", "v")], [cfg("b", "v")], [cfg("c", "v")], SyncStatus.IN_SYNC)
    assert [(len(c.deltas), c.status) for c in crumbs] == [
        (3, SyncStatus.WAIT_FOR_DATASTORE),
        (0, SyncStatus.IN_SYNC),
    ]


def test_noop_updates_are_skipped_and_deletes_always_recorded(cache: SnapshotCache) -> None:
    crumbs = drive(
        cache,
        [cfg("a", "1", "1")],
        [cfg("a", "1", "2", UpdateType.UPDATED)],  # same value, new revision: no-op
        [cfg("a", "2", "3", UpdateType.UPDATED)],
        [delete("never-seen")],
        [delete("a")],
    )
    flat = [d for c in crumbs for d in deltas(c)]
    a, never = GlobalConfigKey("a").default_path(), GlobalConfigKey("never-seen").default_path()
    assert flat == [(a, 1), (a, 2), (never, 3), (a, 3)]
    assert snapshot(crumbs[-1]) == {}


def test_nothing_changed_mints_no_crumb(cache: SnapshotCache) -> None:
    crumbs = drive(cache, [cfg("a", "1")], SyncStatus.IN_SYNC)
    assert crumbs[-1].status is SyncStatus.IN_SYNC
    more = drive_more(cache, [cfg("a", "1", "5", UpdateType.UPDATED)], SyncStatus.IN_SYNC)
    assert more == []


def drive_more(cache: SnapshotCache, *items: list[Update] | SyncStatus) -> list[Breadcrumb]:
    last = cache.latest()
    restarted = SnapshotCache("felix", cache.max_batch_size)
    restarted._master, restarted._current = cache._master, last  # continue the same chain
    drive(restarted, *items)
    return chain(last)


def test_snapshot_entries_are_new_and_deltas_keep_their_type(cache: SnapshotCache) -> None:
    crumbs = drive(cache, [cfg("a", "1")], [cfg("a", "2", "2", UpdateType.UPDATED)])
    a = GlobalConfigKey("a").default_path()
    assert [d for c in crumbs for d in deltas(c)] == [(a, 1), (a, 2)]
    entry = crumbs[-1].snapshot_entries()[0]
    assert msgpack.unpackb(entry.snapshot)[-1] == 1
    assert msgpack.unpackb(entry.delta)[-1] == 2


def test_copy_on_write_keeps_a_taken_snapshot_frozen() -> None:
    cache = SnapshotCache("felix", max_batch_size=1)
    cache.start()
    try:
        cache.on_updates([cfg("a", "1")])
        wait(lambda: cache.latest().seq == 1)
        taken = cache.current()  # freezes
        cache.on_updates([cfg("a", "2", "2", UpdateType.UPDATED), cfg("b", "1")])
        wait(lambda: cache.latest().seq == 3)
        assert snapshot(taken) == {GlobalConfigKey("a").default_path(): "1"}
        assert snapshot(cache.current()) == {
            GlobalConfigKey("a").default_path(): "2",
            GlobalConfigKey("b").default_path(): "1",
        }
    finally:
        cache.stop()


def wait(pred, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_validation_turns_a_nameless_workload_endpoint_into_a_delete() -> None:
    key = WorkloadEndpointKey("h", "k8s", "ns/p", "eth0")
    value = decode_value(key, {"state": "active", "name": "", "profile_ids": [], "mac": ""})
    entry = validate_and_serialize(Update(key, value, "1", UpdateType.NEW))
    assert entry.is_delete and entry.update_type == 3


def test_validation_turns_a_value_its_key_cannot_carry_into_a_delete() -> None:
    entry = validate_and_serialize(Update(GlobalConfigKey("x"), 5, "1", UpdateType.NEW))
    assert entry.is_delete
    assert msgpack.unpackb(entry.delta) == [
        GlobalConfigKey("x").default_path(),
        None,
        "1",
        "",
        None,
        3,
    ]
