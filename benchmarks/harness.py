"""Tiny benchmark harness: every benchmark prints one JSON result line.

A result compares the measured value against a baseline measured *in the same run*, so the ratio
means something on a noisy machine where absolute times do not.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable


def emit(bench: str, metric: str, value: float, baseline: float, **extra: object) -> dict:
    """Print and return the result line ``{"bench", "metric", "value", "baseline", "ratio"}``."""
    ratio = value / baseline if baseline else float("inf")
    line = {
        "bench": bench,
        "metric": metric,
        "value": round(value, 6),
        "baseline": round(baseline, 6),
        "ratio": round(ratio, 4),
        **extra,
    }
    print(json.dumps(line), flush=True)
    return line


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    """Best wall-clock time of ``repeat`` calls, in seconds (best-of filters scheduler noise)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


if __name__ == "__main__":  # pragma: no cover - manual smoke run
    emit("harness", "noop", 1.0, 1.0)
    sys.exit(0)
