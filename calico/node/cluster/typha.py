"""The cluster's optional Typha: one real ``calico component typha`` in the lan namespace.

With ``up --typha`` every node's Felix (and confd, which reads ``FELIX_TYPHAADDR`` too) syncs
through this one Typha at ``<router>:5473`` instead of watching the datastore itself; Typha is
the only syncer client of the cluster's datastore. Ports are free by construction (only etcd
and Typha run in the lan namespace); health and metrics listen on the namespace's loopback.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from calico.node.cluster import procs
from calico.node.cluster.fabric import in_netns
from calico.node.cluster.spec import ClusterSpec
from calico.node.errors import NodeError
from calico.node.run.provision import calico_exe

PORT = 5473
HEALTH_PORT = 9098
METRICS_PORT = 9093
READY_TIMEOUT = 120.0
_WAIT = """
import sys, time, urllib.request
deadline = time.monotonic() + float(sys.argv[2])
while True:
    try:
        with urllib.request.urlopen(sys.argv[1], timeout=1) as r:
            print("ready"); break
    except OSError:
        pass
    if time.monotonic() > deadline:
        print("timeout"); break
    time.sleep(0.3)
"""


def address(spec: ClusterSpec) -> str:
    """What the nodes' ``FELIX_TYPHAADDR`` is set to."""
    return f"{spec.router_ip}:{PORT}"


def typha_dir(spec: ClusterSpec) -> Path:
    return Path(spec.root) / "typha"


def log_file(spec: ClusterSpec) -> Path:
    return typha_dir(spec) / "typha.log"


def _env(spec: ClusterSpec) -> dict[str, str]:
    if spec.datastore == "etcdv3":
        ds = {"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": spec.etcd_endpoint}
    else:
        ds = {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": str(spec.local_datastore)}
    return {
        **ds,
        "TYPHA_SERVERHOST": spec.router_ip,
        "TYPHA_SERVERPORT": str(PORT),
        "TYPHA_HEALTHENABLED": "true",
        "TYPHA_HEALTHHOST": "127.0.0.1",
        "TYPHA_HEALTHPORT": str(HEALTH_PORT),
        "TYPHA_PROMETHEUSMETRICSENABLED": "true",
        "TYPHA_PROMETHEUSMETRICSHOST": "127.0.0.1",
        "TYPHA_PROMETHEUSMETRICSPORT": str(METRICS_PORT),
        "TYPHA_LOGSEVERITYSCREEN": "info",
        "TYPHA_SHUTDOWNTIMEOUTSECS": "5",
    }


def start(spec: ClusterSpec, timeout: float = READY_TIMEOUT) -> int:
    """Start Typha and wait until it is ready (all its caches in sync); returns its pid."""
    d = typha_dir(spec)
    d.mkdir(parents=True, exist_ok=True)
    argv = [calico_exe(), "component", "typha", "-c", str(d / "typha.cfg")]
    proc = procs.spawn_in(spec.lan_netns, argv, spec.root, log_file(spec), _env(spec))
    (d / "typha.pid").write_text(f"{proc.pid}\n", encoding="utf-8")
    url = f"http://127.0.0.1:{HEALTH_PORT}/readiness"
    verdict = in_netns(spec.lan_netns, sys.executable, "-c", _WAIT, url, str(timeout))
    if verdict.strip() != "ready" or proc.poll() is not None:
        raise NodeError(f"Typha did not become ready within {timeout:.0f}s (see {log_file(spec)})")
    return proc.pid


def stop(spec: ClusterSpec, timeout: float = 30.0) -> bool:
    """SIGTERM Typha (graceful: spreads its disconnects) and wait; False when none ran."""
    try:
        pid = int((typha_dir(spec) / "typha.pid").read_text().strip())
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):  # reap it when it is our child
            os.waitpid(pid, os.WNOHANG)
        if not Path(f"/proc/{pid}").exists() or _zombie(pid):
            return True
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    return True


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def metrics(spec: ClusterSpec) -> str:
    """Typha's Prometheus text (read from inside the lan namespace)."""
    code = (
        "import sys, urllib.request\n"
        "print(urllib.request.urlopen(sys.argv[1], timeout=3).read().decode())"
    )
    url = f"http://127.0.0.1:{METRICS_PORT}/metrics"
    return in_netns(spec.lan_netns, sys.executable, "-c", code, url)
