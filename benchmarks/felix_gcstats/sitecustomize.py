"""Loaded into Felix by ``bench_felix_scale.py --gc-stats FILE`` (via ``PYTHONPATH``): times
every cyclic-GC collection with ``gc.callbacks`` and rewrites ``GCSTATS_FILE`` with the
totals once a second, so the bench reads what collection cost up to in-sync (the question
design/performance.md "Full-Felix scale: the snapshot path" asks: is the collector part of
the per-endpoint cost inside Felix?)."""

from __future__ import annotations

import gc
import json
import os
import threading
import time

_OUT = os.environ.get("GCSTATS_FILE")
_stats = {"collections": [0, 0, 0], "seconds": [0.0, 0.0, 0.0], "collected": 0}
_start: list[float] = [0.0]


def _on_gc(phase: str, info: dict) -> None:
    if phase == "start":
        _start[0] = time.perf_counter()
        return
    gen = info["generation"]
    _stats["collections"][gen] += 1
    _stats["seconds"][gen] += time.perf_counter() - _start[0]
    _stats["collected"] += info["collected"]


def _writer() -> None:
    while True:
        time.sleep(1.0)
        snap = {**_stats, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}
        tmp = f"{_OUT}.tmp"
        with open(tmp, "w") as f:
            json.dump(snap, f)
        os.replace(tmp, _OUT)


if _OUT:
    gc.callbacks.append(_on_gc)
    threading.Thread(target=_writer, name="gcstats", daemon=True).start()
