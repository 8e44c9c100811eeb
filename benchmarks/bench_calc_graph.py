"""Calculation-graph benchmark: cold start, incremental latency and peak RSS.

Run as ``python benchmarks/bench_calc_graph.py``. Dataset: 10,000 workload endpoints on 100
hosts (100 on this host), 1,000 policies in 5 tiers using 500 distinct selectors (each with an
ingress rule on a selector and a named port, and an egress rule on a network-set selector), 200
network sets, 20 namespace profiles. Updates are fed in the Felix syncer's kind order (policies
before endpoints) through the synchronous pipeline (graph + EventSequencer).

Each index variant runs in its own child process so peak RSS is its own; the linear-scan index
run is the baseline of every line (``ratio`` = indexed / linear). Metrics:

* ``calc_cold_start_s``: first update -> the flush that emits InSync. Target <= 5 s.
* ``calc_label_change_ms``: median latency (update + flush) of one local endpoint label change.
* ``calc_selector_change_ms``: median latency of one policy selector change. Targets <= 5 ms.
* ``calc_peak_rss_mb``: peak RSS of the child process. Target <= 400 MB.

``--scale`` instead runs the issue-23 shape (upstream's largest calc-graph benchmark): 250,000
remote endpoints on 1,250 hosts plus 200 local ones, 10,000 policies over 5,000 selectors;
baseline = the default dataset in the same run. Metrics ``calc_scale_in_sync_s`` (target <= 20 s
for all of Felix, so the calc graph's share must be well under), ``calc_scale_peak_rss_mb``
(<= 1.5 GB) and ``calc_scale_churn_p99_ms``: 200 remote-endpoint changes (label flips that
move them in and out of selectors used by local policies, and IP changes), each update + flush.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(_ROOT))
sys.path.insert(0, str(_ROOT.parent))

from harness import emit  # noqa: E402

from calico.felix.calc.calc_graph import build_felix_calc_pipeline  # noqa: E402
from calico.model import (  # noqa: E402
    NetworkSetKey,
    PolicyKey,
    ProfileLabelsKey,
    ProfileRulesKey,
    TierKey,
    WorkloadEndpointKey,
)
from calico.model.values import decode_value  # noqa: E402
from calico.syncer.api import SyncStatus, Update, UpdateType  # noqa: E402

HOSTS = 100
WEPS_PER_HOST = 100
POLICIES = 1000
TIERS = 5
SELECTORS = 500
NETSETS = 200
NAMESPACES = 20
LOCAL = "host-0"
REPEATS = 51
SCALE = {"HOSTS": 1251, "WEPS_PER_HOST": 200, "POLICIES": 10000, "SELECTORS": 5000}
CHURN = 200


def use_scale() -> None:
    """Switch the module's dataset shape to ``SCALE`` (host-0's 200 endpoints are local)."""
    globals().update(SCALE)


def selector(j: int) -> str:
    if SELECTORS > 500:  # more distinct selectors: also vary the namespace
        return f"app == 'app{j % 50}' && role == 'r{(j // 50) % 10}' && team == 't{j // 500}'"
    return f"app == 'app{j % 50}' && role == 'r{(j // 50) % 10}'"


def wep_labels(i: int, app_override: str | None = None) -> dict[str, str]:
    labels = {
        "app": app_override or f"app{i % 50}",
        "role": f"r{(i // 7) % 10}",
        "projectcalico.org/namespace": f"ns{i % NAMESPACES}",
    }
    if SELECTORS > 500:  # the scale shape's selectors also use a team label
        labels["team"] = f"t{i % 10}"
    return labels


def wep_value(i: int, app_override: str | None = None) -> dict[str, Any]:
    return {
        "state": "active",
        "name": f"cali{i:08d}",
        "ipv4_nets": [f"10.{i // 65536}.{(i // 256) % 256}.{i % 256}/32"],
        "profile_ids": [f"kns.ns{i % NAMESPACES}"],
        "labels": wep_labels(i, app_override),
        "ports": [{"name": "http", "protocol": "tcp", "port": 8080}],
    }


def wep_key(i: int) -> WorkloadEndpointKey:
    return WorkloadEndpointKey(f"host-{i // WEPS_PER_HOST}", "k8s", f"ns/pod{i}", "eth0")


def policy_value(k: int, sel: str | None = None) -> dict[str, Any]:
    return {
        "tier": f"tier{k % TIERS}",
        "order": float(k),
        "selector": sel or selector(k % SELECTORS),
        "inbound_rules": [
            {
                "action": "allow",
                "protocol": "tcp",
                "src_selector": selector((k * 7) % SELECTORS),
                "dst_ports": [80, "http"],
            }
        ],
        "outbound_rules": [{"action": "allow", "dst_selector": f"netset == 'n{k % NETSETS}'"}],
        "types": ["ingress", "egress"],
    }


def dataset() -> list[tuple[Any, Any]]:
    out: list[tuple[Any, Any]] = []
    for t in range(TIERS):
        out.append((TierKey(f"tier{t}"), {"order": float(t * 100), "defaultAction": "Deny"}))
    for k in range(POLICIES):
        out.append((PolicyKey("GlobalNetworkPolicy", "", f"pol{k}"), policy_value(k)))
    for j in range(NETSETS):
        nets = {"nets": [f"10.200.{j}.0/24"], "labels": {"netset": f"n{j}"}}
        out.append((NetworkSetKey(f"gns{j}"), nets))
    for n in range(NAMESPACES):
        allow = {"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]}
        out.append((ProfileRulesKey(f"kns.ns{n}"), allow))
        out.append((ProfileLabelsKey(f"kns.ns{n}"), {"pcns.team": f"team{n % 4}"}))
    for i in range(HOSTS * WEPS_PER_HOST):
        out.append((wep_key(i), wep_value(i)))
    return out


class CountingSink:
    def __init__(self) -> None:
        self.messages = 0
        self.in_sync = False

    def __call__(self, batch: list[Any]) -> None:
        self.messages += len(batch)
        self.in_sync = self.in_sync or any(type(m).__name__ == "InSync" for m in batch)


def as_update(key: Any, value: Any) -> Update:
    """The v1 JSON decoded into its typed value, as the syncer hands it over (not timed)."""
    return Update(key, decode_value(key, value), "1", UpdateType.UPDATED)


def run_child(index: str) -> dict[str, float]:
    updates = [as_update(k, v) for k, v in dataset()]
    sink = CountingSink()
    pipeline = build_felix_calc_pipeline(LOCAL, sink, index=index, synchronous=True)
    start = time.perf_counter()
    pipeline.on_status_updated(SyncStatus.RESYNC_IN_PROGRESS)
    pipeline.on_updates(updates)
    pipeline.on_status_updated(SyncStatus.IN_SYNC)
    pipeline.flush()
    cold = time.perf_counter() - start
    assert sink.in_sync
    del updates

    def timed(update: Update) -> float:
        t0 = time.perf_counter()
        pipeline.on_updates([update])
        pipeline.flush()
        return (time.perf_counter() - t0) * 1000

    local_i = 3  # host-0's endpoints are 0..99; alternate between two new app labels
    label_ms = [
        timed(as_update(wep_key(local_i), wep_value(local_i, f"app{(r % 2) * 17 + 1}")))
        for r in range(REPEATS)
    ]
    # Alternate between two selectors that each match one (different) local endpoint.
    pkey = PolicyKey("GlobalNetworkPolicy", "", "pol5")
    selector_ms = [
        timed(as_update(pkey, policy_value(5, selector(60 if r % 2 else 353))))
        for r in range(REPEATS)
    ]
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "cold_start_s": cold,
        "label_change_ms": statistics.median(label_ms),
        "selector_change_ms": statistics.median(selector_ms),
        "peak_rss_mb": rss_mb,
        "messages": sink.messages,
    }


def run_scale_child(hosts: int | None = None) -> dict[str, float]:
    """Cold start and remote-endpoint churn at the ``SCALE`` shape (``hosts`` hosts of 200
    endpoints when given: bench_felix_scale.py's smaller runs), indexed only."""
    use_scale()
    if hosts is not None:
        globals()["HOSTS"] = hosts
    updates = [as_update(k, v) for k, v in dataset()]
    sink = CountingSink()
    pipeline = build_felix_calc_pipeline(LOCAL, sink, synchronous=True)
    start, cpu_start = time.perf_counter(), time.process_time()
    pipeline.on_status_updated(SyncStatus.RESYNC_IN_PROGRESS)
    pipeline.on_updates(updates)
    pipeline.on_status_updated(SyncStatus.IN_SYNC)
    pipeline.flush()
    cold = time.perf_counter() - start
    cpu_at_in_sync = time.process_time()
    calc_cpu = cpu_at_in_sync - cpu_start
    assert sink.in_sync
    del updates
    churn_ms = []
    for r in range(CHURN):
        i = WEPS_PER_HOST + (r * 7919) % (HOSTS * WEPS_PER_HOST - WEPS_PER_HOST)  # remote
        value = wep_value(i, f"app{(i + 1 + r % 2) % 50}")
        if r % 4 == 3:
            value["ipv4_nets"] = [f"10.250.{r // 256}.{r % 256}/32"]
        t0 = time.perf_counter()
        pipeline.on_updates([as_update(wep_key(i), value)])
        pipeline.flush()
        churn_ms.append((time.perf_counter() - t0) * 1000)
    churn_ms.sort()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "in_sync_s": cold,
        "cpu_s": cpu_at_in_sync,
        "calc_cpu_s": calc_cpu,  # the pipeline alone (cpu_s also counts building the updates)
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "churn_p99_ms": churn_ms[min(len(churn_ms) - 1, round(0.99 * (len(churn_ms) - 1)))],
        "churn_p50_ms": churn_ms[len(churn_ms) // 2],
        "messages": sink.messages,
        "endpoints": HOSTS * WEPS_PER_HOST,
        "policies": POLICIES,
    }


def main_scale() -> None:
    def child(*args: str) -> dict[str, float]:
        out = subprocess.run(
            [sys.executable, __file__, "--child", *args], check=True, capture_output=True, text=True
        ).stdout
        return json.loads(out.strip().splitlines()[-1])

    big, base = child("scale"), child("indexed")
    emit("calc_graph", "calc_scale_in_sync_s", big["in_sync_s"], base["cold_start_s"],
         target=20.0, endpoints=big["endpoints"], policies=big["policies"],
         baseline_is="default dataset (10k endpoints, 1k policies), same run")  # fmt: skip
    emit("calc_graph", "calc_scale_peak_rss_mb", big["peak_rss_mb"], base["peak_rss_mb"],
         target=1536.0, baseline_is="default dataset, same run")  # fmt: skip
    emit("calc_graph", "calc_scale_churn_p99_ms", big["churn_p99_ms"], base["label_change_ms"],
         target=50.0, p50_ms=round(big["churn_p50_ms"], 3), changes=CHURN,
         baseline_is="median local label change, default dataset, same run")  # fmt: skip


def main() -> None:
    results: dict[str, dict[str, float]] = {}
    for index in ("indexed", "linear"):
        out = subprocess.run(
            [sys.executable, __file__, "--child", index],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        results[index] = json.loads(out.strip().splitlines()[-1])
    fast, slow = results["indexed"], results["linear"]
    targets = {
        "cold_start_s": 5.0,
        "label_change_ms": 5.0,
        "selector_change_ms": 5.0,
        "peak_rss_mb": 400.0,
    }
    for metric, target in targets.items():
        emit(
            "calc_graph",
            f"calc_{metric}",
            fast[metric],
            slow[metric],
            target=target,
            meets_target=fast[metric] <= target,
            baseline_is="linear-scan index",
        )


if __name__ == "__main__":
    if sys.argv[1:3] == ["--child", "scale"]:
        hosts = int(sys.argv[3]) if len(sys.argv) > 3 else None
        print(json.dumps(run_scale_child(hosts)), flush=True)
    elif len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(run_child(sys.argv[2])), flush=True)
    elif sys.argv[1:] == ["--scale"]:
        main_scale()
    else:
        main()
