"""Tiny benchmark harness: every benchmark prints one JSON result line.

A result compares the measured value against a baseline measured *in the same run*, so the ratio
means something on a noisy machine where absolute times do not.
"""

from __future__ import annotations

import json
import statistics
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


def paired_rounds(fn: Callable[[], object], base: Callable[[], object], rounds: int = 7) -> dict:
    """``fn`` and its baseline ``base`` once each per round, in alternating order.

    A ratio of two best-ofs taken minutes apart swings with the machine's load; a ratio per
    round, of two calls made back to back, does much less. Returns the wall-clock medians
    (``value`` and ``baseline``) and the min/median/max of the per-round ratios, wall-clock and
    this process's CPU time, for :func:`emit`."""
    wall: list[tuple[float, float]] = []
    cpu: list[tuple[float, float]] = []
    for i in range(rounds):
        times: dict[str, tuple[float, float]] = {}
        order = (("fn", fn), ("base", base)) if i % 2 == 0 else (("base", base), ("fn", fn))
        for name, call in order:
            start, start_cpu = time.perf_counter(), time.process_time()
            call()
            times[name] = (time.perf_counter() - start, time.process_time() - start_cpu)
        wall.append((times["fn"][0], times["base"][0]))
        cpu.append((times["fn"][1], times["base"][1]))
    ratios = sorted(a / b for a, b in wall)
    cpu_ratios = sorted(a / b for a, b in cpu)
    return {
        "value": statistics.median(a for a, _ in wall),
        "baseline": statistics.median(b for _, b in wall),
        "rounds": rounds,
        "ratio_min": round(ratios[0], 4),
        "ratio_median": round(statistics.median(ratios), 4),
        "ratio_max": round(ratios[-1], 4),
        "value_min": round(min(a for a, _ in wall), 6),
        "baseline_min": round(min(b for _, b in wall), 6),
        # This process's CPU seconds (all threads): immune to other processes' load, but blind
        # to work done elsewhere (a server), so it means something only for in-process baselines.
        "cpu_ratio_min": round(cpu_ratios[0], 4),
        "cpu_ratio_median": round(statistics.median(cpu_ratios), 4),
        "cpu_ratio_max": round(cpu_ratios[-1], 4),
    }


if __name__ == "__main__":  # pragma: no cover - manual smoke run
    emit("harness", "noop", 1.0, 1.0)
    sys.exit(0)
