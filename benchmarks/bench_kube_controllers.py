"""kube-controllers: a full resync of a large cluster, and node-deletion GC.

1. Full resync (etcd mode): the fake API server (child process) holds 5,000 nodes, 50,000
   pods (10 namespaces, 100 NetworkPolicies); a real etcd holds the Calico side: 5,000 Calico
   Nodes and 50,000 WorkloadEndpoints, 10% of them with stale labels. Value: from starting
   the Kubernetes view to the end of one pass of every controller (node with label sync,
   namespace, serviceaccount, policy, workloadendpoint). Baseline, same run: the raw reads
   any resync needs (list of nodes + pods from the API server, list of Nodes + WEPs from etcd
   through the backends, no conversion). Target: value <= 30 s.
2. Node-deletion GC (etcd mode): a node with 500 allocations (one handle each) among 20 other
   nodes with 25 each; value: the node controller pass after the Kubernetes node's deletion is
   seen (scan every block, release the 500, release the node's affinities). Baseline, same
   run: releasing 500 known addresses of another node straight through the IPAM library (one
   ``release_ips`` call). Target: value <= 2 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))

from harness import emit  # noqa: E402

from calico.api import parse_resource  # noqa: E402
from calico.datastore.client import Client  # noqa: E402
from calico.datastore.config import DatastoreConfig  # noqa: E402
from calico.datastore.kubernetes.native.pods import pod_to_wep  # noqa: E402
from calico.model.resources import RESOURCE_PREFIX  # noqa: E402

NODES, PODS, NAMESPACES, POLICIES = 5_000, 50_000, 10, 100
GC_ALLOCS, GC_OTHER_NODES, GC_OTHER_ALLOCS = 500, 20, 25


def _pod(i: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"pod{i}",
            "namespace": f"ns{i % NAMESPACES}",
            "uid": f"uid-{i}",
            "labels": {"app": f"app{i % 50}"},
        },
        "spec": {"nodeName": f"node{i % NODES}", "containers": [{}]},
        "status": {"podIP": f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"},
    }


def serve() -> None:
    """Child process: the fake API server with the big cluster; prints its URL."""
    from k8s_fake_apiserver import FakeAPIServer

    api = FakeAPIServer(bookmark_interval=60.0).start()
    for n in range(NODES):
        api.put_object("v1", "nodes", {"metadata": {"name": f"node{n}", "labels": {"z": "a"}}})
    for n in range(NAMESPACES):
        api.put_object("v1", "namespaces", {"metadata": {"name": f"ns{n}"}})
    for i in range(PODS):
        api.put_object("v1", "pods", _pod(i))
    for k in range(POLICIES):
        api.put_object(
            "networking.k8s.io/v1",
            "networkpolicies",
            {
                "metadata": {"name": f"np{k}", "namespace": f"ns{k % NAMESPACES}"},
                "spec": {"podSelector": {"matchLabels": {"app": f"app{k % 50}"}}},
            },
        )
    print(api.url, flush=True)
    sys.stdin.read()
    api.stop()


def _calico_node(n: int) -> tuple[str, str]:
    node = {
        "apiVersion": "projectcalico.org/v3",
        "kind": "Node",
        "metadata": {"name": f"node{n}"},
        "spec": {"orchRefs": [{"nodeName": f"node{n}", "orchestrator": "k8s"}]},
    }
    return f"{RESOURCE_PREFIX}nodes/node{n}", json.dumps(node)


def _wep(i: int) -> tuple[str, str]:
    wep = pod_to_wep(_pod(i))
    assert wep is not None
    if i % 10 == 0:
        wep["metadata"]["labels"] = {"stale": "yes"}
    ns, name = wep["metadata"]["namespace"], wep["metadata"]["name"]
    return f"{RESOURCE_PREFIX}workloadendpoints/{ns}/{name}", json.dumps(wep)


def full_resync(etcd_endpoints: str) -> None:
    from calico.datastore.etcd import EtcdBackend
    from calico.datastore.kubernetes import KubernetesBackend
    from calico.ipam import IPAMClient
    from calico.kube_controllers.ipamgc import IPAMGarbageCollector
    from calico.kube_controllers.kubecache import KubeCache
    from calico.kube_controllers.node import NodeController
    from calico.kube_controllers.sync import PodController, PolicyController, ProfileController

    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    try:
        url = proc.stdout.readline().strip()
        etcd = EtcdBackend([etcd_endpoints])
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda kv: etcd.apply(*kv), map(_calico_node, range(NODES))))
            list(pool.map(lambda kv: etcd.apply(*kv), map(_wep, range(PODS))))
        kube_backend = KubernetesBackend(
            DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": url})
        )

        start = time.perf_counter()
        for prefix in ("nodes/", "workloadendpoints/"):
            kube_backend.list(RESOURCE_PREFIX + prefix)
            etcd.list(RESOURCE_PREFIX + prefix)
        baseline = time.perf_counter() - start

        calico = Client(etcd)
        start = time.perf_counter()
        kube = KubeCache(kube_backend)
        kube.start()
        assert kube.wait_in_sync(300), "Kubernetes view never in sync"
        synced = time.perf_counter() - start
        node = NodeController(
            calico,
            kube,
            IPAMGarbageCollector(IPAMClient(calico), 900.0),
            kubernetes_datastore=False,
            sync_labels=True,
            auto_host_endpoints=False,
        )
        ctrls: list[Any] = [
            node,
            ProfileController("namespace", calico, kube, "kns."),
            ProfileController("serviceaccount", calico, kube, "ksa."),
            PolicyController(calico, kube),
            PodController(etcd, kube),
        ]
        passes = {}
        for ctrl in ctrls:
            t = time.perf_counter()
            ctrl.reconcile()
            passes[ctrl.name] = round(time.perf_counter() - t, 2)
        value = time.perf_counter() - start
        second = time.perf_counter()
        writes = sum(c.reconcile() or 0 for c in ctrls[1:])
        idle = time.perf_counter() - second
        kube.stop()
        kube_backend.close()
        etcd.close()
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(60)
    emit(
        "kube_controllers",
        "full_resync_5000_nodes_50000_pods_s",
        value,
        baseline,
        target_s=30.0,
        baseline_is="raw list of nodes+pods (API server) and Nodes+WEPs (etcd), same run",
        view_in_sync_s=round(synced, 2),
        passes_s=passes,
        second_pass_s=round(idle, 2),
        second_pass_writes=writes,
    )


def node_gc(etcd_endpoints: str) -> None:
    from k8s_fake_apiserver import FakeAPIServer

    from calico.datastore.etcd import EtcdBackend
    from calico.datastore.kubernetes import KubernetesBackend
    from calico.ipam import IPAMClient
    from calico.kube_controllers.ipamgc import IPAMGarbageCollector
    from calico.kube_controllers.kubecache import KubeCache
    from calico.kube_controllers.node import NodeController

    etcd = EtcdBackend([etcd_endpoints])
    calico = Client(etcd)
    calico.create(
        parse_resource(
            {
                "apiVersion": "projectcalico.org/v3",
                "kind": "IPPool",
                "metadata": {"name": f"gc-{uuid.uuid4().hex[:6]}"},
                "spec": {"cidr": "10.128.0.0/12"},
            }
        )
    )
    ipam = IPAMClient(calico)
    with FakeAPIServer(bookmark_interval=60.0) as api:
        nodes = ["victim", "twin"] + [f"other{n}" for n in range(GC_OTHER_NODES)]
        for node in nodes:
            api.put_object("v1", "nodes", {"metadata": {"name": node}})

        def assign(args: tuple[str, int]) -> str:
            node, i = args
            attrs = {"node": node, "namespace": "ns", "pod": f"{node}-p{i}"}
            v4, _ = ipam.auto_assign(1, 0, f"k8s-pod-network.{node}-{i}", attrs, node)
            return str(v4[0].ip)

        jobs = [(n, i) for n in ("victim", "twin") for i in range(GC_ALLOCS)]
        jobs += [(f"other{n}", i) for n in range(GC_OTHER_NODES) for i in range(GC_OTHER_ALLOCS)]
        with ThreadPoolExecutor(8) as pool:
            ips = list(pool.map(assign, jobs))
        for (node, i), ip in zip(jobs, ips, strict=True):
            api.put_object(
                "v1",
                "pods",
                {
                    "metadata": {"name": f"{node}-p{i}", "namespace": "ns"},
                    "spec": {"nodeName": node, "containers": [{}]},
                    "status": {"podIP": ip},
                },
            )
        kube_backend = KubernetesBackend(
            DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": api.url})
        )
        kube = KubeCache(kube_backend)
        kube.start()
        assert kube.wait_in_sync(60)
        ctrl = NodeController(
            calico,
            kube,
            IPAMGarbageCollector(ipam, 900.0),
            kubernetes_datastore=False,
            sync_labels=False,
            auto_host_endpoints=False,
        )
        ctrl.reconcile()
        api.delete_object("v1", "nodes", "victim")
        deadline = time.monotonic() + 30
        while "victim" in kube.node_names() and time.monotonic() < deadline:
            time.sleep(0.01)
        start = time.perf_counter()
        result = ctrl.reconcile()
        value = time.perf_counter() - start
        assert result is not None and len(result.released) == GC_ALLOCS, result

        twin = [ip for (node, _), ip in zip(jobs, ips, strict=True) if node == "twin"]
        start = time.perf_counter()
        missing = ipam.release_ips(twin)
        baseline = time.perf_counter() - start
        assert not missing
        kube.stop()
        kube_backend.close()
    etcd.close()
    emit(
        "kube_controllers",
        "node_deletion_gc_500_allocations_s",
        value,
        baseline,
        target_s=2.0,
        baseline_is="release_ips of 500 known addresses of another node, same run",
        other_allocations=GC_OTHER_NODES * GC_OTHER_ALLOCS + GC_ALLOCS,
    )


def main(only: str | None = None) -> None:
    """Both benchmarks, or ``only`` one of them (``gc`` / ``resync``, e.g. to profile)."""
    from calico.datastore.etcd.server import EtcdServer

    server = EtcdServer(fast_leases=False)
    server.start()
    try:
        if only in (None, "gc"):
            node_gc(server.endpoints)
        if only in (None, "resync"):
            full_resync(server.endpoints)
    finally:
        server.stop()
        server.cleanup()


if __name__ == "__main__":
    if "--serve" in sys.argv:
        serve()
    else:
        main(sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None)
