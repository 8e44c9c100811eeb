"""DedupeBuffer ordering, dedupe and restart semantics, plus a model-based property test."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calico.model import GlobalConfigKey
from calico.syncer.api import SyncStatus, Update, UpdateType
from calico.syncer.dedupebuffer import DedupeBuffer


class Recorder:
    def __init__(self, gate: threading.Event | None = None) -> None:
        self.events: list[object] = []
        self.gate = gate

    def on_status_updated(self, status: SyncStatus) -> None:
        if self.gate is not None:
            self.gate.wait(5)
        self.events.append(status)

    def on_updates(self, updates: list[Update]) -> None:
        if self.gate is not None:
            self.gate.wait(5)
        self.events.extend(updates)

    def updates(self) -> list[tuple[str, object, UpdateType]]:
        return [(u.key.name, u.value, u.update_type) for u in self.events if isinstance(u, Update)]

    def state(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for u in self.events:
            if isinstance(u, Update):
                if u.value is None:
                    out.pop(u.key.name, None)
                else:
                    out[u.key.name] = u.value
        return out


def up(name: str, value: object, rev: str = "1") -> Update:
    """An update of the config key ``name`` (any key type would do; the buffer is generic)."""
    kind = UpdateType.NEW if value is not None else UpdateType.DELETED
    return Update(GlobalConfigKey(name), value, rev, kind)


@pytest.fixture
def gated() -> Iterator[tuple[DedupeBuffer, Recorder, threading.Event]]:
    """A buffer whose consumer is held until the test opens the gate: queued items pile up."""
    gate = threading.Event()
    rec = Recorder(gate)
    buf = DedupeBuffer(rec)
    buf.start()
    yield buf, rec, gate
    gate.set()
    buf.stop()


def test_passes_updates_in_order() -> None:
    rec = Recorder()
    buf = DedupeBuffer(rec)
    buf.start()
    buf.on_status_updated(SyncStatus.RESYNC_IN_PROGRESS)
    buf.on_updates([up("a", 1), up("b", 2)])
    buf.on_status_updated(SyncStatus.IN_SYNC)
    assert buf.wait_idle()  # otherwise the next update could legitimately replace "a" in place
    buf.on_updates([up("a", 3, "2")])
    assert buf.wait_idle()
    buf.stop()
    assert rec.events[0] is SyncStatus.RESYNC_IN_PROGRESS
    assert rec.updates() == [
        ("a", 1, UpdateType.NEW),
        ("b", 2, UpdateType.NEW),
        ("a", 3, UpdateType.UPDATED),
    ]
    assert rec.events.index(SyncStatus.IN_SYNC) == 3


def test_later_update_replaces_queued_value_in_place(gated) -> None:
    buf, rec, gate = gated
    buf.on_status_updated(SyncStatus.RESYNC_IN_PROGRESS)  # consumer blocks on this
    buf.on_updates([up("a", 1), up("b", 2), up("a", 10)])
    gate.set()
    assert buf.wait_idle()
    assert rec.updates() == [("a", 10, UpdateType.NEW), ("b", 2, UpdateType.NEW)]


def test_delete_of_unsent_key_vanishes(gated) -> None:
    buf, rec, gate = gated
    buf.on_status_updated(SyncStatus.RESYNC_IN_PROGRESS)
    buf.on_updates([up("a", 1), up("b", 2), up("a", None)])
    gate.set()
    assert buf.wait_idle()
    assert rec.updates() == [("b", 2, UpdateType.NEW)]


def test_delete_of_unknown_key_dropped() -> None:
    rec = Recorder()
    buf = DedupeBuffer(rec)
    buf.start()
    buf.on_updates([up("ghost", None)])
    assert buf.wait_idle()
    buf.stop()
    assert rec.events == []


def test_repeated_status_collapsed() -> None:
    rec = Recorder()
    buf = DedupeBuffer(rec)
    buf.start()
    for s in (SyncStatus.WAIT_FOR_DATASTORE, SyncStatus.WAIT_FOR_DATASTORE, SyncStatus.IN_SYNC):
        buf.on_status_updated(s)
    buf.on_status_updated(SyncStatus.IN_SYNC)
    assert buf.wait_idle()
    buf.stop()
    assert rec.events == [SyncStatus.WAIT_FOR_DATASTORE, SyncStatus.IN_SYNC]


def test_restart_synthesises_deletes_for_vanished_keys() -> None:
    rec = Recorder()
    buf = DedupeBuffer(rec)
    buf.start()
    buf.on_updates([up("a", 1), up("b", 2), up("c", 3)])
    buf.on_status_updated(SyncStatus.IN_SYNC)
    assert buf.wait_idle()
    buf.on_typha_connection_restarted()
    buf.on_status_updated(SyncStatus.WAIT_FOR_DATASTORE)
    buf.on_status_updated(SyncStatus.RESYNC_IN_PROGRESS)
    buf.on_updates([up("a", 1, "5"), up("d", 4, "5")])  # b and c vanished meanwhile
    buf.on_status_updated(SyncStatus.IN_SYNC)
    assert buf.wait_idle()
    buf.stop()
    assert rec.state() == {"a": 1, "d": 4}
    tail = rec.events[rec.events.index(SyncStatus.RESYNC_IN_PROGRESS) :]
    assert [(u.key.name, u.update_type) for u in tail if isinstance(u, Update)] == [
        ("a", UpdateType.UPDATED),
        ("d", UpdateType.NEW),
        ("b", UpdateType.DELETED),
        ("c", UpdateType.DELETED),
    ]
    assert tail[-1] is SyncStatus.IN_SYNC


def test_batches_bounded() -> None:
    sizes: list[int] = []

    class Sizes(Recorder):
        def on_updates(self, updates: list[Update]) -> None:
            sizes.append(len(updates))

    buf = DedupeBuffer(Sizes(), batch_size=100)
    gate_rec = buf  # start after queueing so all 250 are pending at once
    buf.on_updates([up(f"k{i}", i) for i in range(250)])
    gate_rec.start()
    assert buf.wait_idle()
    buf.stop()
    assert sizes == [100, 100, 50]


# -- model-based property test ---------------------------------------------------------------

ops = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.sampled_from("abcdef"), st.integers(0, 5)),
        st.tuples(st.just("del"), st.sampled_from("abcdef"), st.none()),
        st.tuples(st.just("restart"), st.none(), st.none()),
        st.tuples(st.just("insync"), st.none(), st.none()),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_consumer_state_matches_source(operations) -> None:
    """Whatever the interleaving, after the final IN_SYNC the consumer's view equals the
    source's, every NEW/UPDATED is consistent with what was sent, and no delete is unmatched."""
    rec = Recorder()
    buf = DedupeBuffer(rec, batch_size=3)
    source: dict[str, int] = {}
    buf.start()
    for op, key, value in operations:
        if op == "set":
            source[key] = value
            buf.on_updates([up(key, value)])
        elif op == "del":
            source.pop(key, None)
            buf.on_updates([up(key, None)])
        elif op == "restart":
            # A reconnect: the new source only re-sends a subset of what it has.
            buf.on_typha_connection_restarted()
            keep = dict(list(source.items())[::2])
            source = keep
            buf.on_updates([up(k, v) for k, v in keep.items()])
        else:
            buf.on_status_updated(SyncStatus.IN_SYNC)
    buf.on_status_updated(SyncStatus.RESYNC_IN_PROGRESS)
    buf.on_status_updated(SyncStatus.IN_SYNC)
    assert buf.wait_idle()
    buf.stop()
    assert rec.state() == source
    have: set[str] = set()
    for u in rec.events:
        if isinstance(u, Update):
            if u.update_type is UpdateType.NEW:
                assert u.key not in have
                have.add(u.key)
            elif u.update_type is UpdateType.UPDATED:
                assert u.key in have
            else:
                assert u.key in have
                have.discard(u.key)
