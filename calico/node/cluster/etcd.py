"""The cluster's etcd: one real ``etcd`` inside the lan namespace, on the router address.

Every node reaches it over the bridge at ``http://172.30.0.1:2379``; the port is free by
construction (nothing else runs in that namespace). Data lives under the cluster root.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from calico.node.cluster import procs
from calico.node.cluster.fabric import in_netns
from calico.node.cluster.spec import ETCD_PORT, ClusterSpec
from calico.node.errors import NodeError

READY_TIMEOUT = 30.0
# Connect from inside the lan namespace until etcd answers its health endpoint.
_WAIT = """
import sys, time, urllib.request
deadline = time.monotonic() + float(sys.argv[2])
while True:
    try:
        with urllib.request.urlopen(sys.argv[1] + "/health", timeout=1) as r:
            if b"true" in r.read():
                print("ready"); break
    except OSError:
        pass
    if time.monotonic() > deadline:
        print("timeout"); break
    time.sleep(0.2)
"""


def etcd_binary() -> str:
    exe = shutil.which("etcd") or ("/usr/bin/etcd" if Path("/usr/bin/etcd").exists() else "")
    if not exe:
        raise NodeError("etcd not found: install etcd-server (apt-get install etcd-server)")
    return exe


def start(spec: ClusterSpec) -> int:
    """Start etcd and wait until it is healthy; returns its pid."""
    import sys

    exe = etcd_binary()
    spec.etcd_dir.mkdir(parents=True, exist_ok=True)
    client = spec.etcd_endpoint
    peer = "http://127.0.0.1:2380"
    proc = procs.spawn_in(
        spec.lan_netns,
        [
            exe,
            *("--name", spec.name),
            *("--data-dir", str(spec.etcd_dir / "data")),
            *("--listen-client-urls", f"{client},http://127.0.0.1:{ETCD_PORT}"),
            *("--advertise-client-urls", client),
            *("--listen-peer-urls", peer),
            *("--initial-advertise-peer-urls", peer),
            *("--initial-cluster", f"{spec.name}={peer}"),
        ],
        spec.root,
        spec.etcd_dir / "etcd.log",
        {"ETCD_UNSUPPORTED_ARCH": "", "ETCD_LOG_LEVEL": "warn"},
    )
    (spec.etcd_dir / "etcd.pid").write_text(f"{proc.pid}\n", encoding="utf-8")
    verdict = in_netns(spec.lan_netns, sys.executable, "-c", _WAIT, client, str(READY_TIMEOUT))
    if verdict.strip() != "ready" or proc.poll() is not None:
        raise NodeError(
            f"etcd did not become healthy at {client} within {READY_TIMEOUT:.0f}s "
            f"(see {spec.etcd_dir / 'etcd.log'})"
        )
    return proc.pid
