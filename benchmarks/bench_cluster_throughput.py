"""Cross-node pod TCP throughput over VXLAN vs. the same pods routed without encapsulation.

Run as root: ``python benchmarks/bench_cluster_throughput.py``. Builds a 2-node cluster with the
product's ``calico.node.cluster`` (both nodes on one subnet, real ``calico node run`` each, one
etcd), one pod per node, and measures ``iperf3`` from pod a (node 1) to pod b (node 2):

* ``vxlan_gbps``: the pools' ``vxlanMode: Always`` (Felix routes b's block via vxlan.calico);
* baseline: the same pods after switching the pools to ``CrossSubnet``, where Felix routes the
  same-subnet peer's block directly via eth0 (no encapsulation).

Rounds alternate between the two modes and the best of each is kept (2 shared cores: the best
round is the least disturbed). Target: ratio >= 0.7. The cluster is removed afterwards.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(_ROOT))
sys.path.insert(0, str(_ROOT.parent))

from harness import emit  # noqa: E402

from calico.node.cluster import ctl, lifecycle, pods, spec  # noqa: E402

BENCH = "cluster_throughput"
SECONDS = 4
ROUNDS = 3
PORT = 5201


def route_dev(netns: str, dst: str) -> str:
    out = subprocess.run(
        ["ip", "-n", netns, "-j", "route", "show", dst],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    found = json.loads(out or "[]")
    return str(found[0].get("dev", "")) if found else ""


def wait_route(netns: str, dst: str, dev: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while route_dev(netns, dst) != dev:
        if time.monotonic() > deadline:
            raise SystemExit(f"route to {dst} in {netns} is not via {dev} after {timeout:.0f}s")
        time.sleep(0.2)


def iperf(client_netns: str, server_ip: str) -> float:
    """Gbit/s received by the server, from one ``iperf3`` run."""
    proc = subprocess.run(
        [
            *("ip", "netns", "exec", client_netns, "iperf3", "-J"),
            *("-c", server_ip, "-p", str(PORT), "-t", str(SECONDS), "-O", "1"),
        ],
        capture_output=True,
        text=True,
        timeout=SECONDS + 30,
        check=False,
    )
    doc = json.loads(proc.stdout or "{}")
    if "error" in doc or proc.returncode != 0:
        raise SystemExit(f"iperf3 failed: {doc.get('error') or proc.stderr.strip()}")
    return float(doc["end"]["sum_received"]["bits_per_second"]) / 1e9


def main() -> None:
    if os.geteuid() != 0 or shutil.which("iperf3") is None:
        print(json.dumps({"bench": BENCH, "skipped": "needs root and iperf3"}))
        return
    root = tempfile.mkdtemp(prefix="calico-bench-cluster-")
    cluster = spec.build(f"bch-{uuid.uuid4().hex[:6]}", root, 2, "etcdv3")
    quiet = lambda _m: None  # noqa: E731
    try:
        lifecycle.up(cluster, quiet)
        n1, n2 = cluster.nodes
        a = pods.add_pod(cluster, n1, "bench", "a")
        cluster = cluster.with_pod(a.netns)
        b = pods.add_pod(cluster, n2, "bench", "b")
        cluster = cluster.with_pod(b.netns)
        spec.save(cluster)
        server = subprocess.Popen(
            ["ip", "netns", "exec", b.netns, "iperf3", "-s", "-p", str(PORT)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.5)
        block = str(ipaddress.ip_network(f"{b.ip}/26", strict=False))
        best = {"vxlan.calico": 0.0, "eth0": 0.0}
        modes = {"vxlan.calico": "Always", "eth0": "CrossSubnet"}
        try:
            for _ in range(ROUNDS):
                for dev, mode in modes.items():
                    ctl.calicoctl(cluster, "apply", "-f", "-", stdin=ctl.pools_yaml(cluster, mode))
                    wait_route(n1.netns, block, dev)
                    best[dev] = max(best[dev], iperf(a.netns, b.ip))
        finally:
            server.kill()
            server.wait()
        emit(
            BENCH,
            "vxlan_gbps",
            best["vxlan.calico"],
            best["eth0"],
            baseline_metric="no_encap_gbps",
            target_ratio=0.7,
            seconds=SECONDS,
            rounds=ROUNDS,
        )
    finally:
        lifecycle.down(root, cluster.name, quiet)


if __name__ == "__main__":
    main()
