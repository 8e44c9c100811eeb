"""From a CNI ADD on node 1 to the pod's block route on node 2, over BGP (root).

Run as root: ``python benchmarks/bench_bgp_route.py``. Builds a 2-node cluster with the
product's ``calico.node.cluster`` (``calico node run --networking-backend bird`` on each node,
one etcd, a no-encap pool) and, per round, makes node 1 claim a fresh block: a new IPv4 pool
(``10.<100+i>.0.0/24``, blocks of /26) replaces the previous one (disabled), confd and BIRD
settle, then a pod is added on node 1 while both nodes' routes are polled (every 20 ms).

* ``cni_add_to_remote_route_p50_s``: from the start of the CNI ADD on node 1 to a ``proto
  bird`` route inside the new pool on node 2 - IPAM's block claim, confd's watch and render,
  ``sv hup bird``, BIRD's reconfiguration and the BGP update (target p50 <= 3 s);
* baseline: in the same rounds, from the same start to the pod's local route on node 1
  (Felix's ``/32`` via its ``cali*`` interface).

One JSON line with p50 (and max, every sample) for both; the cluster is removed afterwards.
``BENCH_BGP_ROUNDS`` sets the number of rounds (default 7).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(_ROOT))
sys.path.insert(0, str(_ROOT.parent))

from harness import emit  # noqa: E402

from calico.node.cluster import ctl, lifecycle, pods, spec  # noqa: E402

BENCH = "bgp_route"
ROUNDS = int(os.environ.get("BENCH_BGP_ROUNDS", "7"))
POLL = 0.02
TIMEOUT = 30.0
SETTLE = 3.0  # after a pool change: confd re-renders both nodes' filters, BIRD reloads


def pool_yaml(name: str, cidr: str, disabled: bool) -> str:
    return f"""apiVersion: projectcalico.org/v3
kind: IPPool
metadata:
  name: {name}
spec:
  cidr: {cidr}
  blockSize: 26
  vxlanMode: Never
  ipipMode: Never
  natOutgoing: true
  nodeSelector: all()
  disabled: {"true" if disabled else "false"}
"""


def routes(netns: str, cidr: str, *extra: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        ["ip", "-n", netns, "-j", "-4", "route", "show", "root", cidr, *extra],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return list(json.loads(out or "[]"))


def one_round(cluster: spec.ClusterSpec, i: int) -> tuple[float, float, float]:
    """(remote route s, local route s, CNI ADD s) for round ``i``."""
    n1, n2 = cluster.nodes
    cidr = f"10.{100 + i}.0.0/24"
    old = "cluster-ipv4" if i == 0 else f"bench-{i - 1}"
    old_cidr = cluster.ipv4_pool if i == 0 else f"10.{99 + i}.0.0/24"
    ctl.calicoctl(cluster, "apply", "-f", "-", stdin=pool_yaml(f"bench-{i}", cidr, False))
    ctl.calicoctl(cluster, "apply", "-f", "-", stdin=pool_yaml(old, old_cidr, True))
    time.sleep(SETTLE)
    added: dict[str, float] = {}

    def add() -> None:
        pods.add_pod(cluster, n1, "bench", f"p{i}")
        added["at"] = time.perf_counter()

    start = time.perf_counter()
    worker = threading.Thread(target=add, daemon=True)
    worker.start()
    remote = local = 0.0
    while not (remote and local):
        now = time.perf_counter()
        if now - start > TIMEOUT:
            raise SystemExit(f"round {i}: no route after {TIMEOUT:.0f}s (remote {remote:.2f})")
        if not remote and routes(n2.netns, cidr, "proto", "bird"):
            remote = now - start
        if not local and any(
            str(r.get("dev", "")).startswith("cali") for r in routes(n1.netns, cidr)
        ):
            local = now - start
        time.sleep(POLL)
    worker.join(TIMEOUT)
    if "at" not in added:
        raise SystemExit(f"round {i}: CNI ADD did not finish")
    return remote, local, added["at"] - start


def main() -> None:
    if os.geteuid() != 0 or shutil.which("bird") is None:
        print(json.dumps({"bench": BENCH, "skipped": "needs root and BIRD"}))
        return
    root = tempfile.mkdtemp(prefix="calico-bench-bgp-")
    cluster = spec.build(f"bgp-{uuid.uuid4().hex[:6]}", root, 2, "etcdv3")
    quiet = lambda _m: None  # noqa: E731
    try:
        lifecycle.up(cluster, quiet, backend="bird", vxlan_mode="Never")
        samples = [one_round(cluster, i) for i in range(ROUNDS)]
        remote = [s[0] for s in samples]
        local = [s[1] for s in samples]
        emit(
            BENCH,
            "cni_add_to_remote_route_p50_s",
            statistics.median(remote),
            statistics.median(local),
            baseline_metric="cni_add_to_local_route_p50_s",
            target_value=3.0,
            remote_max_s=round(max(remote), 3),
            local_max_s=round(max(local), 3),
            cni_add_p50_s=round(statistics.median(s[2] for s in samples), 3),
            remote_s=[round(x, 3) for x in remote],
            local_s=[round(x, 3) for x in local],
            rounds=ROUNDS,
        )
    finally:
        lifecycle.down(root, cluster.name, quiet)


if __name__ == "__main__":
    main()
