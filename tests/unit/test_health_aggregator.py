"""HealthAggregator semantics, driven by a fake clock (no sleeping)."""

from __future__ import annotations

import threading

import pytest

from calico.boxtable import render_box_table
from calico.health import HealthAggregator, UnknownReporterError
from calico.health.aggregator import TABLE_HEADERS


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def agg(clock: FakeClock) -> HealthAggregator:
    return HealthAggregator(clock=clock)


def test_zero_reporters_is_live_and_ready(agg: HealthAggregator) -> None:
    s = agg.summary()
    assert (s.live, s.ready) == (True, True)
    assert "COMPONENT" in s.detail


def test_new_reporter_is_live_but_not_ready(agg: HealthAggregator) -> None:
    agg.register_reporter("felix", live=True, ready=True, timeout=0)
    s = agg.summary()
    assert (s.live, s.ready) == (True, False)
    agg.report("felix", live=True, ready=True)
    s = agg.summary()
    assert (s.live, s.ready) == (True, True)


def test_non_voted_quality_never_counts(agg: HealthAggregator) -> None:
    agg.register_reporter("liveonly", live=True, ready=False)
    agg.register_reporter("readyonly", live=False, ready=True)
    agg.report("liveonly", live=True, ready=False)
    agg.report("readyonly", live=False, ready=True)
    s = agg.summary()
    assert (s.live, s.ready) == (True, True)
    assert "| liveonly  | -       | reporting live | -               |" in s.detail
    assert "| readyonly | -       | -              | reporting ready |" in s.detail


def test_non_live_report(agg: HealthAggregator) -> None:
    agg.register_reporter("loop", live=True, ready=True)
    agg.report("loop", live=False, ready=True)
    s = agg.summary()
    assert (s.live, s.ready) == (False, True)
    assert "reporting non-live" in s.detail


def test_timeout_fails_every_voted_quality(agg: HealthAggregator, clock: FakeClock) -> None:
    agg.register_reporter("loop", live=True, ready=True, timeout=20)
    agg.register_reporter("other", live=True, ready=False, timeout=0)
    agg.report("loop", live=True, ready=True)
    clock.advance(20)  # exactly at the timeout: still fresh
    assert agg.summary().live and agg.summary().ready
    clock.advance(0.001)
    s = agg.summary()
    assert (s.live, s.ready) == (False, False)
    assert s.detail.count("timed out") == 2
    agg.report("loop", live=True, ready=True)  # a new report revives it
    assert agg.summary().live


def test_timeout_only_affects_voted_quality(agg: HealthAggregator, clock: FakeClock) -> None:
    agg.register_reporter("liveonly", live=True, ready=False, timeout=1)
    clock.advance(5)
    s = agg.summary()
    assert (s.live, s.ready) == (False, True)


def test_zero_timeout_never_times_out(agg: HealthAggregator, clock: FakeClock) -> None:
    agg.register_reporter("r", live=True, ready=True, timeout=0)
    agg.report("r", live=True, ready=True)
    clock.advance(10**6)
    assert agg.summary().ready


def test_report_refreshes_timestamp_even_when_unchanged(
    agg: HealthAggregator, clock: FakeClock
) -> None:
    agg.register_reporter("r", live=True, ready=True, timeout=10)
    for _ in range(5):
        clock.advance(8)
        agg.report("r", live=True, ready=True)
    assert agg.summary().live


def test_override_replaces_timeout(agg: HealthAggregator, clock: FakeClock) -> None:
    agg.register_reporter("r", live=True, ready=True, timeout=100)
    agg.report("r", live=True, ready=True)
    agg.set_global_timeout_overrides({"r": 1})
    clock.advance(2)
    s = agg.summary()
    assert not s.live
    assert "1s (override)" in s.detail
    agg.set_global_timeout_overrides({})
    assert agg.summary().live


def test_reregistering_resets_state(agg: HealthAggregator) -> None:
    agg.register_reporter("r", live=True, ready=True)
    agg.report("r", live=True, ready=True)
    agg.register_reporter("r", live=True, ready=True)
    assert not agg.summary().ready


def test_unregistered_report_raises(agg: HealthAggregator) -> None:
    with pytest.raises(UnknownReporterError, match="never registered"):
        agg.report("ghost", live=True, ready=True)


def test_table_exact(agg: HealthAggregator) -> None:
    agg.register_reporter("source2", live=True, ready=True, timeout=0)
    agg.register_reporter("source1", live=False, ready=True, timeout=0.1)
    agg.report("source1", live=True, ready=True)
    agg.report("source2", live=True, ready=True, detail="but very busy!")
    expected = "\n".join(
        [
            "+-----------+---------+----------------+-----------------+----------------+",
            "| COMPONENT | TIMEOUT | LIVENESS       | READINESS       | DETAIL         |",
            "+-----------+---------+----------------+-----------------+----------------+",
            "| source1   | 100ms   | -              | reporting ready |                |",
            "| source2   | -       | reporting live | reporting ready | but very busy! |",
            "+-----------+---------+----------------+-----------------+----------------+",
        ]
    )
    assert agg.summary().detail == expected


def test_empty_table_has_header_only() -> None:
    out = render_box_table(TABLE_HEADERS, [])
    lines = out.splitlines()
    assert lines[1] == "| COMPONENT | TIMEOUT | LIVENESS | READINESS | DETAIL |"
    assert len(lines) == 3 and not out.endswith("\n")


def test_thread_safety(agg: HealthAggregator) -> None:
    names = [f"r{i}" for i in range(8)]
    for n in names:
        agg.register_reporter(n, live=True, ready=True)
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            for i in range(500):
                agg.report(name, live=True, ready=i % 2 == 0)
                agg.summary()
        except BaseException as exc:  # pragma: no cover - only on failure
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for n in names:
        agg.report(n, live=True, ready=True)
    assert agg.summary().ready
