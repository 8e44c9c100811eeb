"""The Kubernetes datastore: initial sync to Felix, and time to first response for a new pod.

The fake API server (``tests/k8s_fake_apiserver.py``) runs in a child process with a synthetic
cluster written straight into its store; this process runs the real KubernetesBackend (the
official client over HTTP), the felix syncer and Felix's calculation graph + event sequencer
(the synchronous pipeline, flushed after every batch), counting the dataplane messages.

1. Initial sync: 10,000 pods (50 nodes, 10 namespaces) and 1,000 NetworkPolicies; time from
   syncer start to the graph's InSync with every update delivered. Baseline in the same run:
   the same resources (converted by the same functions into WorkloadEndpoints, NetworkPolicies
   and profiles) from a local SQLite datastore through the same syncer and graph. Target: value
   <= 10 s.
2. TTFR (syncer + graph, no kernel): on a 1,000-pod / 100-policy cluster, time from the write
   of a new local pod (KDD: POST of the pod; etcd: create of its WorkloadEndpoint) to the
   WorkloadEndpointUpdate leaving the graph. Value: KDD median; baseline: etcd median, same
   run. Target ratio <= 2.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))

from harness import emit  # noqa: E402

from calico.datastore.config import DatastoreConfig  # noqa: E402
from calico.datastore.kubernetes import KubernetesBackend  # noqa: E402
from calico.datastore.kubernetes.native.networkpolicy import (  # noqa: E402
    k8s_network_policy_to_calico,
)
from calico.datastore.kubernetes.native.pods import pod_to_wep  # noqa: E402
from calico.datastore.kubernetes.native.profiles import (  # noqa: E402
    default_allow_profile,
    namespace_profile,
)
from calico.felix.calc.calc_graph import build_felix_calc_pipeline  # noqa: E402
from calico.felix.messages import InSync, WorkloadEndpointUpdate  # noqa: E402
from calico.model.resources import RESOURCE_PREFIX  # noqa: E402
from calico.syncer.api import SyncStatus, Update  # noqa: E402
from calico.syncer.definitions import felix_syncer  # noqa: E402

HOST = "node0"
PODS, POLICIES = 10_000, 1_000
TTFR_PODS, TTFR_POLICIES, TTFR_SAMPLES = 1_000, 100, 20


class Felix:
    """Syncer callbacks feeding the synchronous calc pipeline; records when things leave it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_sync = threading.Event()
        self.seen: dict[str, float] = {}
        self.messages = 0
        self.pipeline = build_felix_calc_pipeline(HOST, self._sink, synchronous=True)

    def _sink(self, batch: list[Any]) -> None:
        now = time.perf_counter()
        self.messages += len(batch)
        for msg in batch:
            if isinstance(msg, InSync):
                self.in_sync.set()
            elif isinstance(msg, WorkloadEndpointUpdate):
                self.seen.setdefault(msg.id.workload_id, now)

    def on_status_updated(self, status: SyncStatus) -> None:
        with self.lock:
            self.pipeline.on_status_updated(status)
            self.pipeline.flush()

    def on_updates(self, updates: list[Update]) -> None:
        with self.lock:
            self.pipeline.on_updates(updates)
            self.pipeline.flush()


def _fake_server(pods: int, policies: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "k8s_fake_apiserver.py"),
            "--pods",
            str(pods),
            "--policies",
            str(policies),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _kdd(url: str) -> KubernetesBackend:
    return KubernetesBackend(DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": url}))


def _pod(i: int, ns: str, node: str, name: str | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name or f"pod{i}",
            "namespace": ns,
            "uid": f"uid-{i}",
            "labels": {"app": f"app{i % 50}", "tier": f"tier{i % 3}"},
        },
        "spec": {
            "nodeName": node,
            "containers": [{"ports": [{"name": "http", "containerPort": 80}]}],
        },
        "status": {"podIP": f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"},
    }


def v3_items(pods: int, policies: int, namespaces: int = 10, nodes: int = 50) -> list[tuple]:
    """The fake cluster's objects as the v3 resources the other datastores would hold."""
    items = []
    p = RESOURCE_PREFIX
    items.append((p + "profiles/projectcalico-default-allow", default_allow_profile()))
    for n in range(namespaces):
        prof = namespace_profile({"metadata": {"name": f"ns{n}", "labels": {"team": f"t{n % 4}"}}})
        items.append((p + f"profiles/kns.ns{n}", prof))
    for i in range(pods):
        wep = pod_to_wep(_pod(i, f"ns{i % namespaces}", f"node{i % nodes}"))
        assert wep is not None
        items.append(
            (p + f"workloadendpoints/{wep['metadata']['namespace']}/{wep['metadata']['name']}", wep)
        )
    for k in range(policies):
        np = {
            "metadata": {"name": f"np{k}", "namespace": f"ns{k % namespaces}"},
            "spec": {
                "podSelector": {"matchLabels": {"app": f"app{k % 50}"}},
                "ingress": [
                    {
                        "from": [{"podSelector": {"matchLabels": {"tier": f"tier{k % 3}"}}}],
                        "ports": [{"port": 80 + k % 5}, {"port": "http"}],
                    }
                ],
                "policyTypes": ["Ingress"],
            },
        }
        items.append(
            (p + f"networkpolicies/ns{k % namespaces}/np{k}", k8s_network_policy_to_calico(np))
        )
    return [(k, json.dumps(v, separators=(",", ":"), sort_keys=True)) for k, v in items]


def time_to_sync(backend: Any) -> tuple[float, int]:
    felix = Felix()
    syncer = felix_syncer(backend, felix)
    start = time.perf_counter()
    syncer.start()
    assert felix.in_sync.wait(300), "never in sync"
    elapsed = time.perf_counter() - start
    syncer.stop()
    return elapsed, felix.messages


def ttfr(backend: Any, write: Any) -> list[float]:
    felix = Felix()
    syncer = felix_syncer(backend, felix)
    syncer.start()
    assert felix.in_sync.wait(120)
    out = []
    for s in range(TTFR_SAMPLES):
        workload = f"ns0/ttfr{s}"
        t0 = time.perf_counter()
        write(s)
        deadline = time.monotonic() + 10
        while workload not in felix.seen and time.monotonic() < deadline:
            time.sleep(0.0005)
        assert workload in felix.seen, f"{workload} never reached the graph"
        out.append((felix.seen[workload] - t0) * 1000)
        time.sleep(0.05)
    syncer.stop()
    return out


def main() -> None:
    # 1. initial sync
    proc, url = _fake_server(PODS, POLICIES)
    try:
        kdd = _kdd(url)
        kdd_s, kdd_msgs = time_to_sync(kdd)
        kdd.close()
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(30)
    from calico.datastore.local import LocalBackend

    with tempfile.TemporaryDirectory() as tmp:
        local = LocalBackend(Path(tmp) / "calico.db")
        local.apply_many(v3_items(PODS, POLICIES))
        local_s, local_msgs = time_to_sync(local)
        local.close()
    emit(
        "kdd",
        "initial_sync_10k_pods_1k_policies_s",
        kdd_s,
        local_s,
        target_s=10.0,
        baseline_is="same resources from the local datastore",
        messages=kdd_msgs,
        baseline_messages=local_msgs,
    )

    # 2. TTFR, KDD vs etcd
    proc, url = _fake_server(TTFR_PODS, TTFR_POLICIES)
    try:
        kdd = _kdd(url)

        def create_pod(s: int) -> None:
            kdd.rest.request(
                "POST",
                "/api/v1/namespaces/ns0/pods",
                body=_pod(50_000 + s, "ns0", HOST, f"ttfr{s}"),
            )

        kdd_ms = ttfr(kdd, create_pod)
        kdd.close()
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(30)
    from calico.datastore.etcd import EtcdBackend
    from calico.datastore.etcd.server import EtcdServer

    server = EtcdServer(fast_leases=False)
    server.start()
    try:
        etcd = EtcdBackend([server.endpoints])
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda kv: etcd.apply(*kv), v3_items(TTFR_PODS, TTFR_POLICIES)))

        def create_wep(s: int) -> None:
            wep = pod_to_wep(_pod(50_000 + s, "ns0", HOST, f"ttfr{s}"))
            assert wep is not None
            key = f"{RESOURCE_PREFIX}workloadendpoints/ns0/{wep['metadata']['name']}"
            etcd.create(key, json.dumps(wep))

        etcd_ms = ttfr(etcd, create_wep)
        etcd.close()
    finally:
        server.stop()
        server.cleanup()
    emit(
        "kdd",
        "ttfr_new_pod_ms_p50",
        statistics.median(kdd_ms),
        statistics.median(etcd_ms),
        target_ratio=2.0,
        baseline_is="etcd mode, same run",
        samples=TTFR_SAMPLES,
        p99_ms=round(max(kdd_ms), 2),
        baseline_p99_ms=round(max(etcd_ms), 2),
    )


if __name__ == "__main__":
    main()
