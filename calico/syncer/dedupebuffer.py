"""An in-order, per-key-deduplicating buffer between a syncer source and its consumer.

Why: a Typha client (or any source that may reconnect) must never block on a slow consumer,
and after a reconnect the consumer must end up with exactly the new snapshot — so keys that
vanished while disconnected need synthetic deletes. One slot per key keeps memory bounded by the
number of keys, however fast the source is.

Invariants:
- Updates reach the consumer in the order their keys were first queued; a later update for a
  queued key replaces its value in place.
- Deleting a key that was queued but never sent removes the slot: the consumer never hears of it.
- UpdateType is recomputed from what the consumer has actually been sent (NEW vs UPDATED), and a
  delete is only delivered for a key that was sent.
- Repeated statuses are collapsed; a status is delivered after every update queued before it.
- After on_typha_connection_restarted(), the next IN_SYNC synthesises deletes for every key that
  was live before the restart and not seen since.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from dataclasses import dataclass

from calico.model import Key
from calico.syncer.api import SyncerCallbacks, SyncStatus, Update, UpdateType, sorted_keys

BATCH_SIZE = 100


@dataclass
class _Slot:
    seq: int
    update: Update


class DedupeBuffer:
    """SyncerCallbacks in front of ``downstream``; delivers on its own thread."""

    def __init__(self, downstream: SyncerCallbacks, batch_size: int = BATCH_SIZE) -> None:
        self._downstream = downstream
        self._batch_size = batch_size
        self._cond = threading.Condition()
        self._order: deque[tuple[int, Key | SyncStatus]] = deque()
        self._slots: dict[Key, _Slot] = {}
        self._seq = itertools.count()
        self._sent: set[Key] = set()  # keys the consumer currently has
        self._last_status: SyncStatus | None = None
        self._keys_before_restart: set[Key] | None = None
        self._seen_since_restart: set[Key] = set()
        self._stopping = False
        self._idle = True
        self._thread = threading.Thread(target=self._run, name="dedupe-buffer", daemon=True)

    # -- producer side (never blocks on the consumer) ------------------------------------------

    def on_updates(self, updates: list[Update]) -> None:
        with self._cond:
            for u in updates:
                self._queue_update(u)
            self._cond.notify()

    def on_status_updated(self, status: SyncStatus) -> None:
        with self._cond:
            if status is SyncStatus.IN_SYNC and self._keys_before_restart is not None:
                for key in sorted_keys(self._keys_before_restart - self._seen_since_restart):
                    self._queue_update(Update(key, None, "", UpdateType.DELETED), track=False)
                self._keys_before_restart = None
                self._seen_since_restart = set()
            if status is not self._last_status:
                self._last_status = status
                self._order.append((next(self._seq), status))
            self._cond.notify()

    def on_typha_connection_restarted(self) -> None:
        with self._cond:
            live = set(self._sent)
            for key, slot in self._slots.items():
                if slot.update.value is None:
                    live.discard(key)
                else:
                    live.add(key)
            if self._keys_before_restart is not None:
                live |= self._keys_before_restart
            self._keys_before_restart = live
            self._seen_since_restart = set()

    def _queue_update(self, u: Update, track: bool = True) -> None:
        if track and self._keys_before_restart is not None:
            self._seen_since_restart.add(u.key)
        slot = self._slots.get(u.key)
        if slot is not None:
            if u.value is None and u.key not in self._sent:
                del self._slots[u.key]  # never sent: the consumer need not hear of it
            else:
                slot.update = u
            return
        if u.value is None and u.key not in self._sent:
            return
        seq = next(self._seq)
        self._slots[u.key] = _Slot(seq, u)
        self._order.append((seq, u.key))

    # -- consumer side -------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(timeout)

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Block until everything queued so far was delivered (tests, orderly shutdown)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._idle and not self._order, timeout)

    def _next_batch(self) -> tuple[list[Update], SyncStatus | None]:
        batch: list[Update] = []
        while self._order and len(batch) < self._batch_size:
            seq, item = self._order[0]
            if isinstance(item, SyncStatus):
                if batch:
                    break
                self._order.popleft()
                return [], item
            self._order.popleft()
            slot = self._slots.get(item)
            if slot is None or slot.seq != seq:
                continue  # removed or superseded
            del self._slots[item]
            u = slot.update
            if u.value is None:
                if item not in self._sent:
                    continue
                self._sent.discard(item)
                batch.append(Update(u.key, None, u.revision, UpdateType.DELETED, u.ttl))
            else:
                kind = UpdateType.UPDATED if item in self._sent else UpdateType.NEW
                self._sent.add(item)
                batch.append(Update(u.key, u.value, u.revision, kind, u.ttl))
        return batch, None

    def _run(self) -> None:
        while True:
            with self._cond:
                self._idle = True
                self._cond.notify_all()
                self._cond.wait_for(lambda: self._stopping or bool(self._order))
                if self._stopping and not self._order:
                    return
                self._idle = False
                batch, status = self._next_batch()
            if status is not None:
                self._downstream.on_status_updated(status)
            elif batch:
                self._downstream.on_updates(batch)
