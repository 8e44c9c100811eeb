"""The watcher syncer's delivery without a dispatcher thread: whichever cache thread finds no
delivery in progress delivers what is queued; callbacks never overlap and keep queue order."""

from __future__ import annotations

import threading
import time
from typing import Any

from calico.model import ResourceKey
from calico.syncer.api import SyncStatus, Update, UpdateType
from calico.syncer.watchersyncer import ResourceType, WatcherSyncer, _Msg

KINDS = ("Tier", "Profile", "GlobalNetworkSet", "HostEndpoint")


class Overlap:
    """Records deliveries and whether two callbacks ever ran at once."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.busy = threading.Lock()
        self.overlapped = False
        self.updates: list[Update] = []
        self.statuses: list[SyncStatus] = []
        self.fail_on = fail_on

    def _enter(self) -> None:
        if not self.busy.acquire(blocking=False):
            self.overlapped = True
            self.busy.acquire()
        time.sleep(0.0005)  # widen the window another delivery would have to overlap in

    def on_updates(self, updates: list[Update]) -> None:
        self._enter()
        try:
            if self.fail_on is not None and len(self.updates) >= self.fail_on:
                raise RuntimeError("consumer failed")
            self.updates.extend(updates)
        finally:
            self.busy.release()

    def on_status_updated(self, status: SyncStatus) -> None:
        self._enter()
        try:
            self.statuses.append(status)
        finally:
            self.busy.release()


def update(kind: str, i: int) -> Update:
    return Update(ResourceKey(kind, f"n{i}"), {"i": i}, str(i), UpdateType.NEW)


def send_concurrently(syncer: WatcherSyncer, per_cache: int) -> None:
    def sender(index: int, kind: str) -> None:
        out: Any = syncer._caches[index].out
        for i in range(per_cache):
            out.put(_Msg(index, updates=[update(kind, i)]))

    threads = [threading.Thread(target=sender, args=(i, k)) for i, k in enumerate(KINDS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)


def test_every_update_is_delivered_once_in_order_and_never_concurrently() -> None:
    consumer = Overlap()
    syncer = WatcherSyncer(None, [ResourceType(k) for k in KINDS], consumer)  # type: ignore[arg-type]
    send_concurrently(syncer, 200)
    assert not consumer.overlapped
    assert syncer._queue.empty()  # nothing left behind by a sender that found the lock taken
    for kind in KINDS:
        mine = [u.key.name for u in consumer.updates if u.key.kind == kind]
        assert mine == [f"n{i}" for i in range(200)]


def test_statuses_follow_the_updates_queued_before_them() -> None:
    consumer = Overlap()
    syncer = WatcherSyncer(None, [ResourceType(k) for k in KINDS[:2]], consumer)  # type: ignore[arg-type]
    for index in range(2):  # the cache threads are not started: this thread is each cache
        out: Any = syncer._caches[index].out
        out.put(_Msg(index, status=SyncStatus.RESYNC_IN_PROGRESS))
        out.put(_Msg(index, updates=[update(KINDS[index], 0)]))
        assert consumer.statuses == [SyncStatus.RESYNC_IN_PROGRESS]
        out.put(_Msg(index, status=SyncStatus.IN_SYNC))
    assert consumer.statuses == [SyncStatus.RESYNC_IN_PROGRESS, SyncStatus.IN_SYNC]
    assert [u.key.kind for u in consumer.updates] == list(KINDS[:2])


def test_a_failing_consumer_stops_delivery_but_not_the_senders(caplog: Any) -> None:
    consumer = Overlap(fail_on=5)
    syncer = WatcherSyncer(None, [ResourceType(k) for k in KINDS], consumer)  # type: ignore[arg-type]
    send_concurrently(syncer, 50)  # no sender thread dies: all of them get through their puts
    assert 5 <= len(consumer.updates) < 200
    delivered = len(consumer.updates)
    out: Any = syncer._caches[0].out
    out.put(_Msg(0, updates=[update(KINDS[0], 999)]))
    assert len(consumer.updates) == delivered
    assert "no further updates are delivered" in caplog.text
