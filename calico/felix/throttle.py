"""A token bucket ("leaky bucket" upstream) that rate-limits Felix's loops: the calculation
graph's flushes (the defaults, upstream's 10 ms / burst 10) and the dataplane loop's applies
(100 ms / burst 10).

Contract: one token accrues every ``interval`` seconds up to ``burst``; the bucket starts full so
the first ``burst`` takes are immediate. Refill is computed lazily from the injected clock (no
timer thread), which keeps the bucket deterministic under a fake clock in tests. Partial progress
towards the next token is kept, so refill never drifts regardless of how often it is polled.
"""

from __future__ import annotations

import time
from collections.abc import Callable

FLUSH_INTERVAL = 0.010  # upstream calc graph: one flush token every 10 ms
FLUSH_BURST = 10  # upstream calc graph: at most 10 tokens banked


class TokenBucket:
    """Not thread-safe: each bucket is owned by one loop thread."""

    def __init__(
        self,
        interval: float = FLUSH_INTERVAL,
        burst: int = FLUSH_BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval <= 0 or burst < 1:
            raise ValueError("token bucket needs interval > 0 and burst >= 1")
        self._interval = interval
        self._burst = burst
        self._clock = clock
        self._tokens = burst
        self._last_refill = clock()

    def _refill(self) -> None:
        now = self._clock()
        if self._tokens >= self._burst:
            # Full: progress towards a token is meaningless; restart the period from now.
            self._last_refill = now
            return
        # The epsilon absorbs float error so that exactly one interval earns exactly one token.
        earned = int((now - self._last_refill) / self._interval + 1e-9)
        if earned <= 0:
            return
        self._tokens = min(self._burst, self._tokens + earned)
        self._last_refill += earned * self._interval

    @property
    def tokens(self) -> int:
        self._refill()
        return self._tokens

    def try_take(self) -> bool:
        """Take one token if available; False (and no change) otherwise."""
        self._refill()
        if self._tokens <= 0:
            return False
        self._tokens -= 1
        return True

    def time_until_token(self) -> float:
        """Seconds until ``try_take`` would succeed (0.0 if it would now)."""
        self._refill()
        if self._tokens > 0:
            return 0.0
        return max(0.0, self._last_refill + self._interval - self._clock())
