"""AsyncCalcGraph: ordering, InSync, throttling, health and failure handling.

A fake clock drives the token bucket and the health aggregator so throttling and time-outs are
deterministic; the loop's real waits are capped at a few ms (``max_wait``) so tests stay fast.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from calico.felix.calc.async_calc_graph import (
    HEALTH_NAME,
    HEALTH_TIMEOUT,
    PREPARE_CHUNK,
    AsyncCalcGraph,
    CalcGraphFailed,
)
from calico.felix.calc.pipeline import CalcPipeline
from calico.felix.messages import InSync, ToDataplane
from calico.felix.throttle import TokenBucket
from calico.health import HealthAggregator
from calico.model import GlobalConfigKey
from calico.syncer.api import SyncerCallbacks, SyncStatus, Update, UpdateType


class FakeClock:
    def __init__(self) -> None:
        self._now = 1000.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


class Recorder:
    """Fake graph, sequencer and sink sharing one event log, so relative order is visible."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.block_key: str | None = None  # names of GlobalConfigKeys
        self.blocked = threading.Event()
        self.release = threading.Event()
        self.fail_key: str | None = None
        self.to_prepare = 0  # inactive policies the fake graph could prepare

    # graph
    def on_update(self, update: Update) -> None:
        name = update.key.name
        self.events.append(("update", name))
        if name == self.fail_key:
            raise ValueError("boom")
        if name == self.block_key:
            self.blocked.set()
            self.release.wait(5)

    def on_status(self, status: SyncStatus) -> None:
        self.events.append(("status", status))

    def flush(self) -> None:
        self.events.append(("graph-flush",))

    @property
    def wants_prepare(self) -> bool:
        return self.to_prepare > 0

    def prepare_policies(self, limit: int) -> list[Any]:
        n = min(limit, self.to_prepare)
        self.to_prepare -= n
        self.events.append(("prepare", limit))
        return [f"prepared-{i}" for i in range(n)]

    # sink
    def sink(self, msgs: list[ToDataplane]) -> None:
        self.events.append(("sink", *msgs))

    def kinds(self) -> list[str]:
        return [e[0] for e in self.events]

    def count(self, kind: str) -> int:
        return self.kinds().count(kind)


class FakeSequencer:
    def __init__(self, rec: Recorder) -> None:
        self._rec = rec

    def flush(self) -> int:
        self._rec.events.append(("seq-flush",))
        return 0

    def pending(self) -> bool:
        return False


def upd(name: str) -> Update:
    return Update(key=GlobalConfigKey(name), value="v", revision="1", update_type=UpdateType.NEW)


def wait_for(pred: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.002)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture
def make(clock: FakeClock, rec: Recorder) -> Iterator[Callable[..., AsyncCalcGraph]]:
    started: list[AsyncCalcGraph] = []

    def factory(
        health: HealthAggregator | None = None, burst: int = 10, **kw: Any
    ) -> AsyncCalcGraph:
        acg = AsyncCalcGraph(
            CalcPipeline(rec, FakeSequencer(rec), rec.sink),
            health,
            clock=clock,
            throttle=TokenBucket(interval=0.010, burst=burst, clock=clock),
            max_wait=0.005,
            **kw,
        )
        started.append(acg)
        acg.start()
        return acg

    yield factory
    rec.release.set()
    for acg in started:
        if acg.is_alive():
            acg.stop(timeout=2)


def test_is_a_syncer_callbacks(make: Callable[..., AsyncCalcGraph]) -> None:
    assert isinstance(make(), SyncerCallbacks)


def test_updates_applied_in_order_then_graph_then_sequencer_flush(
    make: Callable[..., AsyncCalcGraph], rec: Recorder
) -> None:
    acg = make()
    acg.on_updates([upd("a"), upd("b")])
    acg.on_updates([])
    acg.on_updates([upd("c")])
    wait_for(lambda: rec.count("update") == 3 and rec.kinds()[-1] == "seq-flush")
    assert [e[1] for e in rec.events if e[0] == "update"] == ["a", "b", "c"]
    kinds = rec.kinds()
    for i, kind in enumerate(kinds):
        if kind == "graph-flush":
            assert kinds[i + 1] == "seq-flush"
    assert rec.count("graph-flush") >= 1


def test_in_sync_sent_once_and_only_after_first_flush_after_in_sync(
    make: Callable[..., AsyncCalcGraph], rec: Recorder, clock: FakeClock
) -> None:
    acg = make(burst=1)
    acg.on_status_updated(SyncStatus.RESYNC_IN_PROGRESS)
    wait_for(lambda: rec.count("seq-flush") == 1)  # spends the only token
    acg.on_updates([upd("a")])
    acg.on_status_updated(SyncStatus.IN_SYNC)
    wait_for(lambda: ("status", SyncStatus.IN_SYNC) in rec.events)
    time.sleep(0.03)
    assert rec.count("sink") == 0, "InSync must wait for a flush after in-sync"
    clock.advance(0.010)
    wait_for(lambda: rec.count("sink") == 1)
    in_sync_at = rec.events.index(("sink", InSync()))
    status_at = rec.events.index(("status", SyncStatus.IN_SYNC))
    assert rec.kinds()[status_at:in_sync_at] == ["status", "graph-flush", "seq-flush"]
    for key in ("b", "c"):
        clock.advance(0.010)
        acg.on_updates([upd(key)])
        wait_for(lambda: rec.count("seq-flush") >= 3 and rec.kinds()[-1] == "seq-flush")
    acg.on_status_updated(SyncStatus.IN_SYNC)
    clock.advance(0.010)
    time.sleep(0.03)
    assert rec.events.count(("sink", InSync())) == 1


def test_flushes_are_throttled_by_the_token_bucket(
    make: Callable[..., AsyncCalcGraph], rec: Recorder, clock: FakeClock
) -> None:
    acg = make()
    for i in range(25):
        acg.on_updates([upd(str(i))])
    wait_for(lambda: rec.count("update") == 25)
    time.sleep(0.03)
    assert rec.count("graph-flush") == 10  # the burst, then no token without clock progress
    assert rec.kinds()[-1] == "update"  # dirty, waiting for a token
    clock.advance(0.010)
    wait_for(lambda: rec.count("graph-flush") == 11)
    time.sleep(0.03)
    assert rec.count("graph-flush") == 11  # the 15 pending batches coalesced into one flush
    clock.advance(1.0)  # refill: nothing is dirty, so nothing happens
    time.sleep(0.03)
    assert rec.count("graph-flush") == 11


def test_health_not_ready_until_in_sync_then_ready(
    make: Callable[..., AsyncCalcGraph], rec: Recorder, clock: FakeClock
) -> None:
    agg = HealthAggregator(clock=clock)
    acg = make(health=agg)
    assert agg.summary().live
    acg.on_status_updated(SyncStatus.RESYNC_IN_PROGRESS)
    wait_for(lambda: rec.count("status") == 1)
    time.sleep(0.01)
    s = agg.summary()
    assert (s.live, s.ready) == (True, False)
    assert HEALTH_NAME in s.detail
    acg.on_status_updated(SyncStatus.IN_SYNC)
    wait_for(lambda: agg.summary().ready)
    acg.on_status_updated(SyncStatus.RESYNC_IN_PROGRESS)  # e.g. a Typha reconnect
    wait_for(lambda: not agg.summary().ready)


def test_health_reported_periodically_while_idle(
    make: Callable[..., AsyncCalcGraph], rec: Recorder, clock: FakeClock
) -> None:
    reports: list[float] = []

    class SpyAggregator(HealthAggregator):
        def report(self, name: str, *, live: bool, ready: bool, detail: str = "") -> None:
            super().report(name, live=live, ready=ready, detail=detail)
            reports.append(clock())

    agg = SpyAggregator(clock=clock)
    acg = make(health=agg)
    acg.on_status_updated(SyncStatus.IN_SYNC)
    wait_for(lambda: agg.summary().ready)
    for _ in range(6):  # 6 x 11 s = 66 s, well past the 30 s timeout if nobody re-reported
        clock.advance(11)
        wait_for(lambda: reports[-1] == clock())
        assert agg.summary().live and agg.summary().ready
    clock.advance(5)  # less than the interval: no extra report while idle
    time.sleep(0.03)
    assert reports[-1] == clock() - 5


def test_health_times_out_when_stuck_and_recovers(
    make: Callable[..., AsyncCalcGraph], rec: Recorder, clock: FakeClock
) -> None:
    agg = HealthAggregator(clock=clock)
    rec.block_key = "slow"
    acg = make(health=agg)
    acg.on_status_updated(SyncStatus.IN_SYNC)
    wait_for(lambda: agg.summary().ready)
    acg.on_updates([upd("slow"), upd("next")])
    assert rec.blocked.wait(2)
    clock.advance(HEALTH_TIMEOUT + 1)
    s = agg.summary()
    assert (s.live, s.ready) == (False, False)
    assert "timed out" in s.detail
    rec.release.set()
    wait_for(lambda: agg.summary().live)  # reported between updates as soon as it moved on
    wait_for(lambda: ("update", "next") in rec.events)


def test_graph_crash_is_logged_reported_and_reraised(
    make: Callable[..., AsyncCalcGraph], rec: Recorder, clock: FakeClock
) -> None:
    agg = HealthAggregator(clock=clock)
    rec.fail_key = "bad"
    acg = make(health=agg)
    acg.on_updates([upd("ok"), upd("bad"), upd("never")])
    wait_for(lambda: acg.error is not None)
    wait_for(lambda: not acg.is_alive())  # the error is recorded just before the thread ends
    assert ("update", "never") not in rec.events
    s = agg.summary()
    assert not s.live
    assert "calculation graph failed" in s.detail
    with pytest.raises(CalcGraphFailed) as info:
        acg.on_updates([upd("more")])
    assert isinstance(info.value.__cause__, ValueError)
    with pytest.raises(ValueError, match="boom"):
        acg.stop()


def test_stop_joins_quickly_and_drops_later_input(
    make: Callable[..., AsyncCalcGraph], rec: Recorder
) -> None:
    acg = make()
    acg.on_updates([upd("a")])
    wait_for(lambda: rec.count("update") == 1)
    started = time.monotonic()
    acg.stop(timeout=1.0)
    assert time.monotonic() - started < 1.0
    assert not acg.is_alive()
    acg.on_updates([upd("late")])  # after stop: dropped, no error
    assert ("update", "late") not in rec.events


def test_stop_times_out_when_graph_is_stuck(
    make: Callable[..., AsyncCalcGraph], rec: Recorder
) -> None:
    rec.block_key = "slow"
    acg = make()
    acg.on_updates([upd("slow")])
    assert rec.blocked.wait(2)
    with pytest.raises(TimeoutError):
        acg.stop(timeout=0.05)
    rec.release.set()
    acg.stop(timeout=1.0)
    assert not acg.is_alive()


def test_bounded_queue_applies_backpressure(
    make: Callable[..., AsyncCalcGraph], rec: Recorder
) -> None:
    rec.block_key = "slow"
    acg = make(max_queued_batches=1)
    acg.on_updates([upd("slow")])
    assert rec.blocked.wait(2)
    acg.on_updates([upd("queued")])
    done = threading.Event()
    feeder = threading.Thread(target=lambda: (acg.on_updates([upd("third")]), done.set()))
    feeder.start()
    assert not done.wait(0.05), "a full queue must block the syncer"
    rec.release.set()
    assert done.wait(2)
    feeder.join(2)
    wait_for(lambda: ("update", "third") in rec.events)


def test_start_twice_is_an_error(make: Callable[..., AsyncCalcGraph]) -> None:
    acg = make()
    with pytest.raises(RuntimeError):
        acg.start()


def test_prepare_requests_after_in_sync_one_at_a_time(
    make: Callable[..., AsyncCalcGraph], rec: Recorder, clock: FakeClock
) -> None:
    """request_prepare (design/felix-calc.md "Preparing inactive policies"): nothing before
    InSync was sent; then one chunk per request, never two requests queued, and a request
    yields to unflushed changes."""
    rec.to_prepare = PREPARE_CHUNK + 3
    acg = make(burst=1)
    acg.request_prepare()
    time.sleep(0.02)
    assert rec.count("prepare") == 0  # not in sync: start-up is not slowed for a guess
    acg.on_status_updated(SyncStatus.IN_SYNC)
    wait_for(lambda: ("sink", InSync()) in rec.events)

    rec.block_key = "block"
    acg.on_updates([upd("block")])
    assert rec.blocked.wait(2)
    for _ in range(3):
        acg.request_prepare()  # queued once, behind the blocked update
    clock.advance(0.02)  # a token for the blocked update's flush
    rec.release.set()
    wait_for(lambda: rec.count("prepare") == 1)
    time.sleep(0.02)
    assert rec.count("prepare") == 1
    sunk = [e for e in rec.events if e[0] == "sink" and str(e[1]).startswith("prepared")]
    assert sunk == [("sink", *[f"prepared-{i}" for i in range(PREPARE_CHUNK)])]

    acg.on_updates([upd("x")])  # applied, but no token to flush it: dirty
    wait_for(lambda: ("update", "x") in rec.events)
    acg.request_prepare()
    time.sleep(0.02)
    assert rec.count("prepare") == 1  # the unflushed change comes first
    clock.advance(0.02)
    wait_for(lambda: rec.count("seq-flush") >= 3)
    acg.request_prepare()
    wait_for(lambda: rec.count("prepare") == 2)
    assert rec.to_prepare == 0
    acg.request_prepare()  # nothing left: nothing queued
    time.sleep(0.02)
    assert rec.count("prepare") == 2
