"""The WorkloadEndpoint processor's cost per endpoint (issue 23, a Felix start's syncer).

Run as ``python benchmarks/bench_wep_processor.py [--n N]``. Stored endpoints of the scale
bench's shape (``bench_felix_scale.wep_doc``, as ``Client.apply`` stores them) go through the
processor as the syncer calls it (``json.loads`` of the stored text, then the processor).
Baseline, same run, alternating rounds: the model path (``decode_wep`` + the same v1 build),
which is what every endpoint paid before the lean read (design/performance.md "Full-Felix
scale: the lean WorkloadEndpoint read"). CPU time (``process_time``), best of the rounds, as
load moves wall-clock time by 2x here. Both paths' outputs are checked equal first.

Metric ``wep_processor_us``: microseconds per endpoint, lean path; ``baseline`` the model path.
Metric ``wep_convert_us`` (where the syncer has ``ResourceType.lean``): the syncer's whole
conversion of a stored text (``_WatcherCache._convert``) with Felix's WorkloadEndpoint type
(orjson's decode, the lean processor); ``baseline`` the same cache with the stdlib decode and
the processor (what it did before; design/performance.md "The WorkloadEndpoint snapshot at
250,000").
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_felix_scale as scale  # the scale bench's endpoint documents
from harness import emit

from calico.model import ResourceKey
from calico.model.processors import endpoints
from calico.syncer import watchersyncer

BENCH = "wep_processor"


def stored(n: int) -> list[tuple[ResourceKey, str]]:
    out = []
    for doc, _, raw in scale.stored_remote_weps(n):
        meta = doc["metadata"]
        out.append((ResourceKey("WorkloadEndpoint", meta["name"], meta["namespace"]), raw))
    return out


def model_path(key: ResourceKey, value: Any) -> Any:
    return endpoints.workload_endpoint_v1(key, endpoints.decode_wep(key, value))


def per_endpoint_us(process: Any, kvs: list[tuple[ResourceKey, str]]) -> float:
    start = time.process_time()
    for key, raw in kvs:
        process(key, json.loads(raw))
    return (time.process_time() - start) / len(kvs) * 1e6


def cache_convert(rtype: Any) -> Any:
    cache = watchersyncer._WatcherCache(0, rtype, None, queue.Queue(), threading.Event())  # type: ignore[arg-type]
    return cache._convert


def convert_us(convert: Any, kvs: list[tuple[ResourceKey, str]]) -> float:
    start = time.process_time()
    for key, raw in kvs:
        convert(key, raw)
    return (time.process_time() - start) / len(kvs) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="endpoints per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    kvs = stored(args.n)
    for key, raw in kvs[:: max(1, args.n // 200)]:
        if endpoints.workload_endpoint(key, json.loads(raw)) != model_path(key, json.loads(raw)):
            raise AssertionError(f"lean and model outputs differ for {key}")
    lean = model = float("inf")
    for _ in range(args.rounds):
        model = min(model, per_endpoint_us(model_path, kvs))
        lean = min(lean, per_endpoint_us(endpoints.workload_endpoint, kvs))
    emit(BENCH, "wep_processor_us", lean, model, endpoints=args.n, rounds=args.rounds,
         includes="json.loads of the stored text + the processor (v1 key and value)",
         baseline_is="model path (pydantic decode, same v1 build), alternating")  # fmt: skip
    rt = watchersyncer.ResourceType
    if "lean" not in getattr(rt, "__dataclass_fields__", {}):
        return 0  # a tree from before ResourceType.lean: nothing to compare
    fast = cache_convert(rt("WorkloadEndpoint", endpoints.workload_endpoint,
                            endpoints.workload_endpoint_lean))  # fmt: skip
    plain = cache_convert(rt("WorkloadEndpoint", endpoints.workload_endpoint))
    for key, raw in kvs[:: max(1, args.n // 200)]:
        if fast(key, raw) != plain(key, raw):
            raise AssertionError(f"lean and plain conversions differ for {key}")
    best_fast = best_plain = float("inf")
    for _ in range(args.rounds):
        best_plain = min(best_plain, convert_us(plain, kvs))
        best_fast = min(best_fast, convert_us(fast, kvs))
    emit(BENCH, "wep_convert_us", best_fast, best_plain, endpoints=args.n, rounds=args.rounds,
         includes="the syncer's _convert of a stored text (decode + processor)",
         baseline_is="stdlib json.loads + the processor, alternating")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
