"""Exponential retry back-off: the one implementation every retry loop uses.

``next()`` returns the delay to wait before the next attempt: ``initial`` first, then each delay
``multiplier`` times the previous one, capped at ``maximum``. ``reset()`` (after a success) starts
again from ``initial``. No jitter and no clock: callers wait however they wait (``Event.wait``,
a deadline on an injected clock), so the sequence is exact and testable.

Ground floor: standard library only, importable by the syncer and every component.
"""

from __future__ import annotations


class Backoff:
    """``Backoff(0.1, 10.0)`` yields 0.1, 0.2, 0.4, ... 6.4, 10.0, 10.0, ... until ``reset()``.

    Not thread-safe: one retry loop owns one instance.
    """

    __slots__ = ("_next", "initial", "maximum", "multiplier")

    def __init__(self, initial: float, maximum: float, multiplier: float = 2.0) -> None:
        if not 0 < initial <= maximum:
            raise ValueError(f"back-off needs 0 < initial <= maximum, not {initial}, {maximum}")
        if multiplier < 1:
            raise ValueError(f"back-off multiplier must be at least 1, not {multiplier}")
        self.initial = initial
        self.maximum = maximum
        self.multiplier = multiplier
        self._next = initial

    def next(self) -> float:
        """The delay before the next attempt; the one after it grows (up to ``maximum``)."""
        delay = self._next
        self._next = min(delay * self.multiplier, self.maximum)
        return delay

    def reset(self) -> None:
        """Start again from ``initial`` (call after a success)."""
        self._next = self.initial

    def __repr__(self) -> str:
        return (
            f"Backoff(initial={self.initial}, maximum={self.maximum}, "
            f"multiplier={self.multiplier}, next={self._next})"
        )


__all__ = ["Backoff"]
