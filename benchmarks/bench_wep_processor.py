"""The WorkloadEndpoint processor's cost per endpoint (issue 23, a Felix start's syncer).

Run as ``python benchmarks/bench_wep_processor.py [--n N]``. Stored endpoints of the scale
bench's shape (``bench_felix_scale.wep_doc``, as ``Client.apply`` stores them) go through the
processor as the syncer calls it (``json.loads`` of the stored text, then the processor).
Baseline, same run, alternating rounds: the model path (``decode_wep`` + the same v1 build),
which is what every endpoint paid before the lean read (design/performance.md "Full-Felix
scale: the lean WorkloadEndpoint read"). CPU time (``process_time``), best of the rounds, as
load moves wall-clock time by 2x here. Both paths' outputs are checked equal first.

Metric ``wep_processor_us``: microseconds per endpoint, lean path; ``baseline`` the model path.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_felix_scale as scale  # the scale bench's endpoint documents
from harness import emit

from calico.model import ResourceKey
from calico.model.processors import endpoints

BENCH = "wep_processor"


def stored(n: int) -> list[tuple[ResourceKey, str]]:
    out = []
    for i in range(scale.LOCAL_EPS, scale.LOCAL_EPS + n):
        doc = scale.wep_doc(i)
        _, raw = scale.stored(doc, validate=False)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
