"""Memory profile hook for ``bench_felix_scale.py --mem-dir`` (diagnostic; never imported by
calico).

The bench puts this directory on the Felix child's ``PYTHONPATH`` with ``MEMPROF_DIR`` set.
In a Felix process it starts ``tracemalloc`` (``MEMPROF_FRAMES`` frames, default 6; 0 for
none) and a thread that waits for ``$MEMPROF_DIR/trigger``; then it writes ``smaps.txt``
(the process's mappings) and ``report.txt``: traced current and peak, the top allocation
sites by line and by traceback, and the live objects by type (``gc``); then ``done``.
"""

from __future__ import annotations

import collections
import gc
import os
import sys
import threading
import time
import tracemalloc


def _report(out_dir: str) -> None:
    with open("/proc/self/smaps") as f:
        smaps = f.read()
    with open(os.path.join(out_dir, "smaps.txt"), "w") as f:
        f.write(smaps)
    lines = []
    if tracemalloc.is_tracing():
        snap = tracemalloc.take_snapshot()
        cur, peak = tracemalloc.get_traced_memory()
        lines.append(f"traced current {cur / 2**20:.1f} MB, peak {peak / 2**20:.1f} MB")
        stats = snap.statistics("lineno")
        lines.append("\n== top 60 by line ==")
        lines += [f"{s.size / 2**20:8.1f} MB {s.count:9d} {s.traceback[0]}" for s in stats[:60]]
        lines.append("\n== top 25 by traceback ==")
        for s in snap.statistics("traceback")[:25]:
            lines.append(f"{s.size / 2**20:8.1f} MB {s.count:9d}")
            lines += [f"      {f}" for f in s.traceback]
    counts: collections.Counter[str] = collections.Counter()
    sizes: collections.Counter[str] = collections.Counter()
    for obj in gc.get_objects():
        name = type(obj).__qualname__
        counts[name] += 1
        sizes[name] += sys.getsizeof(obj)
    lines.append("\n== gc-tracked objects by type (shallow size) ==")
    for name, size in sizes.most_common(40):
        lines.append(f"{size / 2**20:8.1f} MB {counts[name]:9d} {name}")
    with open(os.path.join(out_dir, "report.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    open(os.path.join(out_dir, "done"), "w").close()


def _watch(out_dir: str) -> None:
    trigger = os.path.join(out_dir, "trigger")
    while not os.path.exists(trigger):
        time.sleep(0.5)
    _report(out_dir)


if os.environ.get("MEMPROF_DIR") and "felix" in sys.argv[1:3]:
    if (frames := int(os.environ.get("MEMPROF_FRAMES", "6"))) > 0:  # 0: smaps and gc only
        tracemalloc.start(frames)
    threading.Thread(target=_watch, args=(os.environ["MEMPROF_DIR"],), daemon=True).start()
