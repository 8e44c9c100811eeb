"""Cost of the flow collector's calc-graph endpoint feed (design/felix-collector.md
"Endpoint names and labels").

Run as ``python benchmarks/bench_felix_flowlogs_lookups.py``. The feed runs on the calc thread,
not in the dataplane, so what it can slow is the calc graph: 10,000 workload endpoints on 100
hosts (100 local) through the synchronous pipeline, cold start to the in-sync flush, with the
listener (``value``) against without (``baseline``), best of 4 each in ABBA order. Target ratio
<= 1.1 (the listener only queues). Then the collector thread's one-off conversion of the queue
(``flowlogs_apply_10k_endpoints_s``, against the cold start) and its lookup of a remote
address (``flowlogs_remote_lookup_us``) against a local one from the dataplane messages.
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(_ROOT))
sys.path.insert(0, str(_ROOT.parent))

from harness import emit  # noqa: E402

from calico.felix.calc.calc_graph import build_felix_calc_pipeline  # noqa: E402
from calico.felix.collector.lookups import Lookups  # noqa: E402
from calico.felix.messages import (  # noqa: E402
    WorkloadEndpoint,
    WorkloadEndpointID,
    WorkloadEndpointUpdate,
)
from calico.model import WorkloadEndpointKey  # noqa: E402
from calico.model import values as v1  # noqa: E402
from calico.syncer.api import SyncStatus, Update, UpdateType  # noqa: E402

HOSTS, PER_HOST = 100, 100
BENCH = "felix_flowlogs_lookups"


def ip(i: int) -> str:
    return f"10.{i // 65536}.{(i // 256) % 256}.{i % 256}"


def updates() -> list[Update]:
    out = []
    for i in range(HOSTS * PER_HOST):
        key = WorkloadEndpointKey(f"host-{i // PER_HOST}", "k8s", f"ns{i % 20}/pod{i}", "eth0")
        value = v1.WorkloadEndpoint(
            state="active",
            name=f"cali{i:08d}",
            ipv4_nets=(f"{ip(i)}/32",),
            labels={"app": f"app{i % 50}", "projectcalico.org/namespace": f"ns{i % 20}"},
        )
        out.append(Update(key, value, "1", UpdateType.NEW))
    return out


def cold_start(batch: list[Update], listener: Any) -> float:
    pipeline = build_felix_calc_pipeline(
        "host-0", lambda msgs: None, synchronous=True, endpoint_listener=listener
    )
    start = time.perf_counter()
    pipeline.on_updates(batch)
    pipeline.on_status_updated(SyncStatus.IN_SYNC)
    pipeline.flush()
    return time.perf_counter() - start


def main() -> None:
    batch = updates()
    on, off = [], []
    for i in range(4):  # ABBA: neither setting always runs first
        for with_feed in (i % 2 == 0, i % 2 == 1):
            gc.collect()  # the previous pipeline's garbage is not this run's cost
            if with_feed:
                on.append(cold_start(batch, Lookups().on_endpoint))
            else:
                off.append(cold_start(batch, None))
    emit(BENCH, "calc_cold_start_s_with_endpoint_feed", min(on), min(off), target_ratio=1.1)

    lookups = Lookups()
    for u in batch:
        lookups.on_endpoint(u.key, u.value)
    start = time.perf_counter()
    lookups.endpoint("192.0.2.1")  # the collector thread applies the queued updates
    drain = time.perf_counter() - start
    emit(BENCH, "flowlogs_apply_10k_endpoints_s", drain, min(off), note="baseline: calc cold start")
    local = Lookups()
    local.on_messages(
        [
            WorkloadEndpointUpdate(
                WorkloadEndpointID("k8s", f"ns/pod{i}", "eth0"),
                WorkloadEndpoint(state="active", name=f"c{i}", ipv4_nets=(f"{ip(i)}/32",)),
            )
            for i in range(PER_HOST)
        ]
    )
    remote_ips = [ip(i) for i in range(PER_HOST, HOSTS * PER_HOST, 97)]
    local_ips = [ip(i) for i in range(PER_HOST)]

    def per_lookup(lk: Lookups, ips: list[str]) -> float:
        n, start = 0, time.perf_counter()
        for _ in range(20):
            for a in ips:
                lk.endpoint(a)
                n += 1
        return (time.perf_counter() - start) / n * 1e6

    emit(
        BENCH,
        "flowlogs_remote_lookup_us",
        per_lookup(lookups, remote_ips),
        per_lookup(local, local_ips),
    )


if __name__ == "__main__":
    main()
