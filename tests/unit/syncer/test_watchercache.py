"""The watcher cache's per-key bookkeeping: NEW/UPDATED/DELETED and relist diffs."""

from __future__ import annotations

import json
import queue
import threading
from typing import Any

from calico.datastore import KVPair
from calico.syncer.api import UpdateType
from calico.syncer.watchersyncer import ResourceType, _WatcherCache


def cache(processor: Any = None) -> _WatcherCache:
    rtype = ResourceType("t", "/t/") if processor is None else ResourceType("t", "/t/", processor)
    return _WatcherCache(0, rtype, None, queue.Queue(), threading.Event())  # type: ignore[arg-type]


def kv(key: str, rev: int, value: Any) -> KVPair:
    return KVPair(key, json.dumps(value), rev)


def kinds(updates) -> list[tuple[str, UpdateType]]:
    return [(u.key, u.update_type) for u in updates]


def test_new_updated_same_revision_swallowed_deleted() -> None:
    c = cache()
    assert kinds(c._apply("/t/a", 1, json.dumps(1))) == [("/t/a", UpdateType.NEW)]
    assert c._apply("/t/a", 1, json.dumps(1)) == []  # same revision: already sent
    assert kinds(c._apply("/t/a", 2, json.dumps(2))) == [("/t/a", UpdateType.UPDATED)]
    assert kinds(c._apply("/t/a", 3, None)) == [("/t/a", UpdateType.DELETED)]
    assert c._apply("/t/a", 4, None) == []  # deletes only for known keys


def test_relist_synthesises_deletes_for_vanished_keys() -> None:
    c = cache()
    c._resync([kv("/t/a", 1, 1), kv("/t/b", 2, 2), kv("/t/c", 3, 3)])
    updates = c._resync([kv("/t/b", 2, 2), kv("/t/c", 7, 30), kv("/t/d", 8, 4)])
    assert sorted(kinds(updates)) == [
        ("/t/a", UpdateType.DELETED),
        ("/t/c", UpdateType.UPDATED),
        ("/t/d", UpdateType.NEW),
    ]
    assert set(c.sources) == {"/t/b", "/t/c", "/t/d"}


def test_fan_out_diff() -> None:
    c = cache(lambda key, value: {f"{key}/{k}": v for k, v in value.items()})
    assert sorted(kinds(c._apply("/t/x", 1, json.dumps({"a": 1, "b": 2})))) == [
        ("/t/x/a", UpdateType.NEW),
        ("/t/x/b", UpdateType.NEW),
    ]
    assert sorted(kinds(c._apply("/t/x", 2, json.dumps({"b": 3})))) == [
        ("/t/x/a", UpdateType.DELETED),
        ("/t/x/b", UpdateType.UPDATED),
    ]
    assert kinds(c._apply("/t/x", 3, None)) == [("/t/x/b", UpdateType.DELETED)]


def test_unparseable_and_failing_values_produce_nothing() -> None:
    def boom(key: str, value: Any) -> dict[str, Any]:
        raise RuntimeError("bad")

    assert cache()._apply("/t/a", 1, "{nope") == []
    assert cache(boom)._apply("/t/a", 1, "{}") == []
