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


# --- the keys-only source record against the old value-keeping one ------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from calico.syncer.api import Update  # noqa: E402


def _fan_out(key: ResourceKey, value: Any) -> dict[Any, Any]:
    """Each resource's value lists the sub-keys it produces (a key set that varies)."""
    return {GlobalConfigKey(f"{key.name}-{k}"): k for k in value}


class _ReferenceCache:
    """The old bookkeeping: each source kept its whole ``{v1 key: value}`` output."""

    def __init__(self) -> None:
        self.sources: dict[ResourceKey, tuple[int, dict[Any, Any]]] = {}

    def apply(self, key: ResourceKey, revision: int, raw_value: str | None) -> list[Update]:
        old_rev, old = self.sources.get(key, (None, {}))
        if raw_value is not None and old_rev == revision:
            return []
        new = {} if raw_value is None else _fan_out(key, json.loads(raw_value))
        rev = str(revision)
        updates = [
            Update(k, v, rev, UpdateType.UPDATED if k in old else UpdateType.NEW)
            for k, v in new.items()
        ]
        updates.extend(Update(k, None, rev, UpdateType.DELETED) for k in old if k not in new)
        if raw_value is None:
            self.sources.pop(key, None)
        else:
            self.sources[key] = (revision, new)
        return updates

    def resync(self, kvs: list[tuple[str, int, str]]) -> list[Update]:
        updates, seen = [], set()
        for name, revision, raw_value in kvs:
            seen.add(rk(name))
            updates += self.apply(rk(name), revision, raw_value)
        for key in [k for k in self.sources if k not in seen]:
            updates += self.apply(key, self.sources[key][0], None)
        return updates


_names = st.sampled_from("abcd")
_values = st.lists(st.sampled_from("xyz"), unique=True).map(json.dumps)
_event = st.tuples(_names, st.integers(1, 4), st.none() | _values)
_listing = st.dictionaries(_names, st.tuples(st.integers(1, 4), _values)).map(
    lambda d: [(n, r, v) for n, (r, v) in sorted(d.items())]
)
_step = st.tuples(st.just("event"), _event) | st.tuples(st.just("list"), _listing)


def _as_tuples(updates: list[Update]) -> list[tuple[Any, ...]]:
    return [(u.key, u.value, u.revision, u.update_type) for u in updates]


@given(st.lists(_step, max_size=25))
def test_keys_only_sources_send_what_the_value_keeping_cache_sent(steps) -> None:
    c, ref = cache(_fan_out), _ReferenceCache()
    for what, arg in steps:
        if what == "event":
            name, revision, raw_value = arg
            got = c._apply(rk(name), revision, raw_value)
            want = ref.apply(rk(name), revision, raw_value)
        else:
            kvs = [KVPair(PREFIX + n, v, r) for n, r, v in arg]
            got = c._resync(kvs)
            want = ref.resync(arg)
            assert kvs == []  # consumed: each raw value is freed once converted
        assert _as_tuples(got) == _as_tuples(want)
        assert {k: (r, set(keys)) for k, (r, keys) in c.sources.items()} == {
            k: (r, set(v)) for k, (r, v) in ref.sources.items()
        }
