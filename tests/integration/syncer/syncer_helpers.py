"""A recording syncer consumer shared by the syncer tests."""

from __future__ import annotations

import threading
from collections.abc import Callable

from calico.model import Key
from calico.syncer.api import SyncStatus, Update, UpdateType


class Recorder:
    """Consumer that keeps the full event log and the resulting key/value view."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.log: list[SyncStatus | Update] = []
        self.state: dict[Key, object] = {}
        self.errors: list[str] = []

    def on_status_updated(self, status: SyncStatus) -> None:
        with self.cond:
            self.log.append(status)
            self.cond.notify_all()

    def on_updates(self, updates: list[Update]) -> None:
        with self.cond:
            for u in updates:
                self.log.append(u)
                if u.update_type is UpdateType.NEW and u.key in self.state:
                    self.errors.append(f"NEW for known key {u.key}")
                if u.update_type is UpdateType.UPDATED and u.key not in self.state:
                    self.errors.append(f"UPDATED for unknown key {u.key}")
                if u.update_type is UpdateType.DELETED:
                    if u.key not in self.state:
                        self.errors.append(f"DELETED for unknown key {u.key}")
                    self.state.pop(u.key, None)
                else:
                    self.state[u.key] = u.value
            self.cond.notify_all()

    def statuses(self) -> list[SyncStatus]:
        with self.cond:
            return [e for e in self.log if isinstance(e, SyncStatus)]

    def wait_for(self, pred: Callable[[Recorder], bool], timeout: float = 10.0) -> None:
        with self.cond:
            ok = self.cond.wait_for(lambda: pred(self), timeout)
        assert ok, f"condition not met in {timeout}s; log tail: {self.log[-10:]}"

    def wait_status(self, status: SyncStatus, count: int = 1, timeout: float = 10.0) -> None:
        self.wait_for(lambda r: r.statuses().count(status) >= count, timeout)
