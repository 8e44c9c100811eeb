"""TokenBucket: burst, refill rate, cap and drift-free partial progress (fake clock)."""

from __future__ import annotations

import pytest

from calico.felix.throttle import FLUSH_BURST, FLUSH_INTERVAL, TokenBucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def test_upstream_defaults() -> None:
    assert (FLUSH_INTERVAL, FLUSH_BURST) == (0.010, 10)


def test_starts_full_and_allows_exactly_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(clock=clock)
    assert [bucket.try_take() for _ in range(11)] == [True] * 10 + [False]
    assert bucket.tokens == 0


def test_refills_one_token_per_interval() -> None:
    clock = FakeClock()
    bucket = TokenBucket(interval=1.0, burst=3, clock=clock)
    for _ in range(3):
        assert bucket.try_take()
    assert bucket.time_until_token() == pytest.approx(1.0)
    clock.now += 0.6
    assert not bucket.try_take()
    assert bucket.time_until_token() == pytest.approx(0.4)
    clock.now += 0.4
    assert bucket.try_take()
    assert not bucket.try_take()


def test_partial_progress_is_kept_across_polls() -> None:
    clock = FakeClock()
    bucket = TokenBucket(interval=1.0, burst=5, clock=clock)
    for _ in range(5):
        bucket.try_take()
    clock.now += 2.5
    assert bucket.tokens == 2
    clock.now += 0.5  # the half token from before plus this half = one more
    assert bucket.tokens == 3


def test_refill_caps_at_burst_and_does_not_bank_time_when_full() -> None:
    clock = FakeClock()
    bucket = TokenBucket(interval=1.0, burst=2, clock=clock)
    clock.now += 100
    assert bucket.tokens == 2
    assert bucket.try_take() and bucket.try_take()
    assert not bucket.try_take()
    assert bucket.time_until_token() == pytest.approx(1.0)


def test_time_until_token_is_zero_when_available() -> None:
    assert TokenBucket(clock=FakeClock()).time_until_token() == 0.0


@pytest.mark.parametrize(("interval", "burst"), [(0, 1), (-1, 1), (1, 0)])
def test_rejects_bad_parameters(interval: float, burst: int) -> None:
    with pytest.raises(ValueError):
        TokenBucket(interval=interval, burst=burst, clock=FakeClock())


def test_exactly_one_interval_earns_a_token_despite_float_error() -> None:
    clock = FakeClock()
    clock.now = 1000.0
    bucket = TokenBucket(interval=0.010, burst=1, clock=clock)
    assert bucket.try_take()
    clock.now += 0.010  # 1000.01 - 1000.0 is slightly less than 0.01 in binary floating point
    assert bucket.try_take()
