"""The WorkloadEndpoint syncer's per-endpoint cost on a listing (issue 23, a Felix start).

Run as ``PYTHONPATH=TREE python benchmarks/bench_wep_resync.py [--n N] [--rounds R]``: the
watcher cache of Felix's WorkloadEndpoint type (``felix_resource_types``) turns a listing of
N stored endpoints of the scale bench's shape into its updates (``_WatcherCache._resync``:
the path's ``ResourceKey``, the decode, the processor, the ``Update``s, the source record),
as at a Felix start; every round a fresh cache. Only the syncer's and the processors' public
shapes are used, so the same script times any tree: run it for main's copy and this one
alternately (design/performance.md "The WorkloadEndpoint snapshot at 250,000"). CPU time,
best of the rounds, with the cyclic collector off as in a Felix start (``calico.gcpause``).

Metric ``wep_resync_us``: microseconds per endpoint; ``baseline`` the same listing through a
cache whose processor forwards the decoded JSON (the syncer's own share, same run).
"""

from __future__ import annotations

import argparse
import gc
import queue
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_felix_scale as scale
from harness import emit

from calico.datastore import KVPair
from calico.syncer.definitions import felix_resource_types
from calico.syncer.watchersyncer import ResourceType, _WatcherCache

BENCH = "wep_resync"


def listing(n: int) -> list[KVPair]:
    return [
        KVPair(path, raw, 1000 + i) for i, (_, path, raw) in enumerate(scale.stored_remote_weps(n))
    ]


def resync_us(rtype: ResourceType, kvs: list[KVPair]) -> tuple[float, int]:
    cache = _WatcherCache(0, rtype, None, queue.Queue(), threading.Event())  # type: ignore[arg-type]
    todo = list(kvs)
    start = time.process_time()
    updates = cache._resync(todo)
    return (time.process_time() - start) / len(kvs) * 1e6, len(updates)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="endpoints per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    (wep,) = [t for t in felix_resource_types() if t.kind == "WorkloadEndpoint"]
    forward = ResourceType("WorkloadEndpoint", lambda key, value: {key: value})
    kvs = listing(args.n)
    gc.disable()
    best = base = float("inf")
    for _ in range(args.rounds):
        us, count = resync_us(wep, kvs)
        if count != args.n:
            raise AssertionError(f"{count} updates for {args.n} endpoints")
        best = min(best, us)
        base = min(base, resync_us(forward, kvs)[0])
        gc.collect()
    emit(BENCH, "wep_resync_us", best, base, endpoints=args.n, rounds=args.rounds,
         includes="source_key, decode, processor, Updates, source record",
         baseline_is="same listing, a processor forwarding the JSON, alternating")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
