"""WatcherSyncer scenarios against real backends."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from syncer_helpers import Recorder

from calico.datastore import Backend
from calico.model import GlobalConfigKey, Key, ResourceKey, key_from_default_path
from calico.model.resources import resource_prefix
from calico.syncer.api import SyncStatus, Update, UpdateType
from calico.syncer.watchersyncer import ResourceType, WatcherSyncer

W, R, S = SyncStatus.WAIT_FOR_DATASTORE, SyncStatus.RESYNC_IN_PROGRESS, SyncStatus.IN_SYNC
# Two cluster-scoped kinds stand in for "resource type a" and "b"; the stored values are plain
# JSON passed through by ``raw`` (the syncer's contract does not depend on the v3 models).
A, B = "Tier", "IPPool"


def path(kind: str, name: str) -> str:
    return resource_prefix(kind) + name


def a(name: str) -> ResourceKey:
    return ResourceKey(A, name)


def b(name: str) -> ResourceKey:
    return ResourceKey(B, name)


def raw(key: ResourceKey, value: Any) -> dict[Key, Any]:
    return {key: value}


def put(backend: Backend, key: ResourceKey, value: Any) -> None:
    backend.apply(key.default_path(), json.dumps(value))


def delete(backend: Backend, key: ResourceKey) -> None:
    backend.delete(key.default_path())


def two_types() -> list[ResourceType]:
    return [ResourceType(A, raw), ResourceType(B, raw)]


def collapse(statuses: list[SyncStatus]) -> list[SyncStatus]:
    out: list[SyncStatus] = []
    for s in statuses:
        if not out or out[-1] is not s:
            out.append(s)
    return out


def test_start_empty(any_backend: Backend, recorder: Recorder) -> None:
    syncer = WatcherSyncer(any_backend, two_types(), recorder)
    syncer.start()
    try:
        recorder.wait_status(S)
        assert recorder.statuses() == [W, R, S]
        assert recorder.state == {}
    finally:
        syncer.stop()


def test_start_with_data_then_changes(any_backend: Backend, recorder: Recorder) -> None:
    put(any_backend, a("1"), {"v": 1})
    put(any_backend, a("2"), {"v": 2})
    put(any_backend, b("1"), {"v": 3})
    put(any_backend, ResourceKey("Node", "ignored"), {"v": 4})
    syncer = WatcherSyncer(any_backend, two_types(), recorder)
    syncer.start()
    try:
        recorder.wait_status(S)
        in_sync_at = recorder.log.index(S)
        before = [e for e in recorder.log[:in_sync_at] if isinstance(e, Update)]
        assert {u.key for u in before} == {a("1"), a("2"), b("1")}
        assert all(u.update_type is UpdateType.NEW for u in before)
        put(any_backend, a("1"), {"v": 10})
        delete(any_backend, a("2"))
        put(any_backend, b("2"), {"v": 5})
        recorder.wait_for(
            lambda r: r.state == {a("1"): {"v": 10}, b("1"): {"v": 3}, b("2"): {"v": 5}}
        )
        after = [(u.key, u.update_type) for u in recorder.log[in_sync_at:] if isinstance(u, Update)]
        # Each resource type has its own watcher: order is kept per type, not across types.
        assert [e for e in after if e[0].kind == A] == [
            (a("1"), UpdateType.UPDATED),
            (a("2"), UpdateType.DELETED),
        ]
        assert [e for e in after if e[0].kind == B] == [(b("2"), UpdateType.NEW)]
        assert recorder.errors == []
    finally:
        syncer.stop()
    # Stop tells the consumer everything is gone, as upstream's Stop does.
    assert recorder.state == {}


def test_updates_flushed_before_status(any_backend: Backend, recorder: Recorder) -> None:
    for i in range(50):
        put(any_backend, a(f"{i:03d}"), i)
    syncer = WatcherSyncer(any_backend, [ResourceType(A, raw)], recorder)
    syncer.start()
    try:
        recorder.wait_status(S)
        idx = recorder.log.index(S)
        assert sum(isinstance(e, Update) for e in recorder.log[:idx]) == 50
    finally:
        syncer.stop()


def test_processor_fan_out_and_diff(any_backend: Backend, recorder: Recorder) -> None:
    """One source key producing several v1 keys: dropped outputs become deletes."""

    def explode(key: ResourceKey, value: Any) -> dict[Key, Any]:
        return {GlobalConfigKey(f"{key.name}/{field}"): v for field, v in value.items()}

    def cfg(name: str) -> GlobalConfigKey:
        return GlobalConfigKey(name)

    syncer = WatcherSyncer(any_backend, [ResourceType(A, explode)], recorder)
    put(any_backend, a("x"), {"a": 1, "b": 2})
    syncer.start()
    try:
        recorder.wait_status(S)
        assert recorder.state == {cfg("x/a"): 1, cfg("x/b"): 2}
        put(any_backend, a("x"), {"b": 3, "c": 4})
        recorder.wait_for(lambda r: r.state == {cfg("x/b"): 3, cfg("x/c"): 4})
        delete(any_backend, a("x"))
        recorder.wait_for(lambda r: r.state == {})
        assert recorder.errors == []
    finally:
        syncer.stop()


def test_bad_values_do_not_stop_the_syncer(any_backend: Backend, recorder: Recorder) -> None:
    def picky(key: ResourceKey, value: Any) -> dict[Key, Any]:
        if value.get("bad"):
            raise ValueError("cannot convert")
        return {key: value}

    any_backend.apply(path(A, "raw"), "{not json")
    any_backend.apply(path(A, "not/a/name"), "{}")  # under the prefix, not a resource path
    put(any_backend, a("bad"), {"bad": True})
    put(any_backend, a("good"), {"ok": 1})
    syncer = WatcherSyncer(any_backend, [ResourceType(A, picky)], recorder)
    syncer.start()
    try:
        recorder.wait_status(S)
        assert recorder.state == {a("good"): {"ok": 1}}
    finally:
        syncer.stop()


def test_compaction_under_a_live_watch_converges(tmp_path, recorder: Recorder) -> None:
    """Compacting while a watcher is stuck mid-event: whether the backend had already read the
    later events or the watcher must relist, the consumer ends with exactly the store's state."""
    import threading

    from calico.datastore.local import LocalBackend

    backend = LocalBackend(tmp_path / "calico.db")
    gate = threading.Event()
    blocked = threading.Event()

    def slow(key: ResourceKey, value: Any) -> dict[Key, Any]:
        if value.get("block"):
            blocked.set()
            gate.wait(10)
        return {key: value}

    for i in range(3):
        put(backend, a(str(i)), {"i": i})
    syncer = WatcherSyncer(backend, [ResourceType(A, slow)], recorder)
    syncer.start()
    try:
        recorder.wait_status(S)
        put(backend, a("blocker"), {"block": True})
        assert blocked.wait(5)  # the watcher thread is now stuck mid-event
        delete(backend, a("0"))
        delete(backend, a("1"))
        put(backend, a("3"), {"i": 3})
        backend.compact(backend.current_revision())
        gate.set()
        recorder.wait_for(lambda r: set(r.state) == {a("2"), a("3"), a("blocker")})
        assert collapse(recorder.statuses()) in ([W, R, S], [W, R, S, R, S])
        assert recorder.errors == []
    finally:
        gate.set()
        syncer.stop()
        backend.close()


def test_etcd_restart_mid_watch(etcd_server, recorder: Recorder) -> None:
    """Kill etcd while watching: back to ResyncInProgress, then InSync with the right state."""
    from etcd_fixture import make_etcd_backend

    backend = make_etcd_backend(etcd_server.endpoints, f"/restart-{uuid.uuid4().hex[:8]}")
    put(backend, a("1"), 1)
    syncer = WatcherSyncer(backend, [ResourceType(A, raw)], recorder)
    syncer.start()
    try:
        recorder.wait_status(S)
        etcd_server.stop(kill=True)
        try:
            recorder.wait_status(R, count=2, timeout=20)
            assert recorder.statuses()[-1] is R
        finally:
            etcd_server.start()
        recorder.wait_status(S, count=2, timeout=30)
        put(backend, a("2"), 2)
        delete(backend, a("1"))
        recorder.wait_for(lambda r: r.state == {a("2"): 2}, timeout=15)
        assert recorder.errors == []
    finally:
        syncer.stop()
        backend.close()


@pytest.mark.parametrize("n_types", [1, 3])
def test_aggregate_status_waits_for_every_cache(
    any_backend: Backend, recorder: Recorder, n_types: int
) -> None:
    types = [ResourceType(kind, raw) for kind in ("Tier", "IPPool", "Profile")[:n_types]]
    syncer = WatcherSyncer(any_backend, types, recorder)
    syncer.start()
    try:
        recorder.wait_status(S)
        # Exactly one IN_SYNC: the aggregate only flips once every cache is in sync.
        assert recorder.statuses().count(S) == 1
    finally:
        syncer.stop()


def test_updates_during_resync_converge(any_backend: Backend, recorder: Recorder) -> None:
    """Writes racing with the initial list: the consumer ends with exactly the store's state."""
    import contextlib
    import threading

    from calico.datastore import ResourceDoesNotExistError

    for i in range(200):
        put(any_backend, a(f"{i:03d}"), {"v": 0})
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set() and n < 400:
            i = n % 250
            if n % 7 == 0:
                with contextlib.suppress(ResourceDoesNotExistError):
                    delete(any_backend, a(f"{i:03d}"))
            else:
                put(any_backend, a(f"{i:03d}"), {"v": n})
            n += 1

    t = threading.Thread(target=writer)
    syncer = WatcherSyncer(any_backend, [ResourceType(A, raw)], recorder)
    t.start()
    syncer.start()
    try:
        t.join(30)
        stop.set()
        listed = any_backend.list(resource_prefix(A)).kvs
        expected = {key_from_default_path(kv.key): json.loads(kv.value) for kv in listed}
        recorder.wait_for(lambda r: r.state == expected, timeout=20)
        assert SyncStatus.IN_SYNC in recorder.statuses()
        assert recorder.errors == []
    finally:
        stop.set()
        syncer.stop()
