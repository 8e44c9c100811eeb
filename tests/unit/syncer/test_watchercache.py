"""The watcher cache's per-key bookkeeping: NEW/UPDATED/DELETED and relist diffs."""

from __future__ import annotations

import json
import queue
import threading
from typing import Any

from calico.datastore import KVPair
from calico.model import GlobalConfigKey, ResourceKey
from calico.model.resources import resource_prefix
from calico.syncer.api import UpdateType
from calico.syncer.watchersyncer import ResourceType, _WatcherCache

KIND = "Tier"
PREFIX = resource_prefix(KIND)


def raw(key: ResourceKey, value: Any) -> dict[Any, Any]:
    """A processor that forwards the stored JSON under its resource key."""
    return {key: value}


def cache(processor: Any = raw) -> _WatcherCache:
    return _WatcherCache(0, ResourceType(KIND, processor), None, queue.Queue(), threading.Event())  # type: ignore[arg-type]


def rk(name: str) -> ResourceKey:
    return ResourceKey(KIND, name)


def kv(name: str, rev: int, value: Any) -> KVPair:
    return KVPair(PREFIX + name, json.dumps(value), rev)


def kinds(updates) -> list[tuple[Any, UpdateType]]:
    return [(u.key, u.update_type) for u in updates]


def test_new_updated_same_revision_swallowed_deleted() -> None:
    c, a = cache(), rk("a")
    assert kinds(c._apply(a, 1, json.dumps(1))) == [(a, UpdateType.NEW)]
    assert c._apply(a, 1, json.dumps(1)) == []  # same revision: already sent
    assert kinds(c._apply(a, 2, json.dumps(2))) == [(a, UpdateType.UPDATED)]
    assert kinds(c._apply(a, 3, None)) == [(a, UpdateType.DELETED)]
    assert c._apply(a, 4, None) == []  # deletes only for known keys


def test_relist_synthesises_deletes_for_vanished_keys() -> None:
    c = cache()
    c._resync([kv("a", 1, 1), kv("b", 2, 2), kv("c", 3, 3)])
    updates = c._resync([kv("b", 2, 2), kv("c", 7, 30), kv("d", 8, 4)])
    assert sorted(kinds(updates), key=lambda t: t[0].name) == [
        (rk("a"), UpdateType.DELETED),
        (rk("c"), UpdateType.UPDATED),
        (rk("d"), UpdateType.NEW),
    ]
    assert set(c.sources) == {rk("b"), rk("c"), rk("d")}


def test_paths_that_are_not_this_kind_are_ignored() -> None:
    c = cache()
    other = KVPair(resource_prefix("IPPool") + "p", "{}", 1)
    updates = c._resync([KVPair(PREFIX + "x/y", "{}", 1), other, kv("ok", 2, {})])
    assert kinds(updates) == [(rk("ok"), UpdateType.NEW)]


def test_fan_out_diff() -> None:
    c = cache(lambda key, value: {GlobalConfigKey(f"{key.name}-{k}"): v for k, v in value.items()})
    x = rk("x")
    assert sorted(kinds(c._apply(x, 1, json.dumps({"a": 1, "b": 2}))), key=str) == [
        (GlobalConfigKey("x-a"), UpdateType.NEW),
        (GlobalConfigKey("x-b"), UpdateType.NEW),
    ]
    assert sorted(kinds(c._apply(x, 2, json.dumps({"b": 3}))), key=str) == [
        (GlobalConfigKey("x-a"), UpdateType.DELETED),
        (GlobalConfigKey("x-b"), UpdateType.UPDATED),
    ]
    assert kinds(c._apply(x, 3, None)) == [(GlobalConfigKey("x-b"), UpdateType.DELETED)]


def test_unparseable_and_failing_values_produce_nothing() -> None:
    def boom(key: ResourceKey, value: Any) -> dict[Any, Any]:
        raise RuntimeError("bad")

    assert cache()._apply(rk("a"), 1, "{nope") == []
    assert cache(boom)._apply(rk("a"), 1, "{}") == []
