"""Benchmark the calico CNI plugin: ADD and DEL latency, sequential and 20-way concurrent.

Runs the installed launchers exactly as a runtime does (CNI_* env + netconf on stdin, one
process per call) against real network namespaces and a fresh local (SQLite) datastore. The
whole run happens inside a throwaway "host" namespace (root needed), so the real host is
untouched. Baseline, measured in the same run: creating and deleting one netns-crossing veth
pair with ``ip`` (a process start plus the kernel work every ADD must do anyway). Also reported:
a bare interpreter start, which bounds from below what any Python plugin can reach.
Targets (issue): ADD p50 <= 150 ms; 20 concurrent ADDs all succeed with p99 <= 1 s.

Each scenario runs twice: in-process (every call imports and does everything itself; metrics
without a suffix) and through the resident helper ``calico component cni daemon`` started for
the run (metrics ending ``_daemon``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import emit

INNER = "CALICO_BENCH_CNI_INNER"
BENCH = "cni"
N = 20


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def main() -> int:
    if os.environ.get(INNER) == "1":
        return run(Path(os.environ["CALICO_BENCH_CNI_TMP"]))
    if os.geteuid() != 0:
        print("bench_cni needs root (network namespaces)", file=sys.stderr)
        return 1
    host = f"bcnihost-{uuid.uuid4().hex[:8]}"
    ip("netns", "add", host)
    try:
        ip("-n", host, "link", "set", "lo", "up")
        with tempfile.TemporaryDirectory(prefix="bench-cni-") as tmp:
            env = dict(os.environ, **{INNER: "1", "CALICO_BENCH_CNI_TMP": tmp})
            cmd = ["ip", "netns", "exec", host, sys.executable, __file__]
            return subprocess.run(cmd, env=env, timeout=900).returncode
    finally:
        subprocess.run(["ip", "netns", "del", host], capture_output=True)


class Setup:
    def __init__(self, tmp: Path) -> None:
        from calico.api.ipam import IPPool
        from calico.cni.install import InstallOptions, install
        from calico.datastore.client import Client
        from calico.datastore.config import DatastoreConfig
        from calico.datastore.factory import open_backend

        self.tmp = tmp
        self.bin = tmp / "bin"
        self.db = tmp / "calico.db"
        install(InstallOptions(conf_dir=str(tmp / "net.d"), bin_dir=str(self.bin),
                               python=sys.executable, nodename="bench-node"))  # fmt: skip
        client = Client(open_backend(DatastoreConfig(local_path=str(self.db))))
        pool = IPPool.model_validate({"metadata": {"name": "p"}, "spec": {"cidr": "10.88.0.0/16"}})
        client.create(pool)
        client.backend.close()
        self.netconf = json.dumps(
            {
                "cniVersion": "1.0.0",
                "name": "benchnet",
                "type": "calico",
                "nodename": "bench-node",
                "datastore_type": "local",
                "datastore_path": str(self.db),
                "ipam_lock_file": str(tmp / "ipam.lock"),
                "log_level": "warning",
                "ipam": {"type": "calico-ipam"},
            }
        ).encode()
        self.namespaces: list[str] = []
        self.daemon_socket = ""  # empty: calls run in-process

    def workload_ns(self) -> str:
        name = f"bcniwl-{uuid.uuid4().hex[:10]}"
        ip("netns", "add", name)
        self.namespaces.append(name)
        return name

    def call(self, command: str, cid: str, ns: str) -> float:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": cid,
            "CNI_NETNS": f"/run/netns/{ns}",
            "CNI_IFNAME": "eth0",
            "CNI_PATH": str(self.bin),
            "CALICO_CNI_DAEMON_SOCKET": self.daemon_socket or "off",
        }
        start = time.perf_counter()
        res = subprocess.run([str(self.bin / "calico")], input=self.netconf, env=env,
                             capture_output=True, timeout=300)  # fmt: skip
        elapsed = time.perf_counter() - start
        if res.returncode != 0:
            raise RuntimeError(f"{command} {cid} failed: {res.stdout!r} {res.stderr[-500:]!r}")
        return elapsed

    def cleanup(self) -> None:
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def veth_baseline(s: Setup, reps: int = 10) -> float:
    """Median seconds to create + delete one veth pair across namespaces with ``ip``."""
    ns = s.workload_ns()
    times = []
    for i in range(reps):
        start = time.perf_counter()
        ip("link", "add", f"bvb{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
        ip("link", "del", f"bvb{i}")
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def python_start(reps: int = 5) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def report(kind: str, verb: str, lat: list[float], base: float, **extra: object) -> None:
    for q, name in ((0.5, "p50"), (0.99, "p99")):
        emit(BENCH, f"{verb}_{name}_{kind}_ms", pct(lat, q) * 1000, base * 1000, n=len(lat),
             **extra)  # fmt: skip


def scenarios(s: Setup, base: float, py: float, suffix: str) -> None:
    tag = "d" if suffix else ""  # container IDs allow no "_"
    # Sequential pod starts and stops.
    seq_ns = [s.workload_ns() for _ in range(N)]
    adds = [s.call("ADD", f"seq{tag}{i}", ns) for i, ns in enumerate(seq_ns)]
    dels = [s.call("DEL", f"seq{tag}{i}", ns) for i, ns in enumerate(seq_ns)]
    report("seq" + suffix, "add", adds, base, target_ms=150, python_start_ms=round(py * 1000, 1))
    report("seq" + suffix, "del", dels, base)
    # 20 at once.
    conc_ns = [s.workload_ns() for _ in range(N)]
    jobs = [(f"conc{tag}{i}", ns) for i, ns in enumerate(conc_ns)]
    with ThreadPoolExecutor(N) as pool:
        start = time.perf_counter()
        adds = list(pool.map(lambda j: s.call("ADD", *j), jobs))
        wall_add = time.perf_counter() - start
        start = time.perf_counter()
        dels = list(pool.map(lambda j: s.call("DEL", *j), jobs))
        wall_del = time.perf_counter() - start
    report("conc20" + suffix, "add", adds, base, target_p99_ms=1000, wall_s=round(wall_add, 2),
           all_succeeded=True)  # fmt: skip
    report("conc20" + suffix, "del", dels, base, wall_s=round(wall_del, 2))


def start_daemon(s: Setup) -> subprocess.Popen[bytes]:
    sock = s.tmp / "cni-daemon.sock"
    proc = subprocess.Popen(
        [sys.executable, "-c", "from calico.cli.main import main; main()", "component", "cni",
         "daemon", "--socket", str(sock)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the CNI daemon did not start")
        time.sleep(0.05)
    s.daemon_socket = str(sock)
    return proc


def run(tmp: Path) -> int:
    s = Setup(tmp)
    try:
        base = veth_baseline(s)
        py = python_start()
        scenarios(s, base, py, "")
        daemon = start_daemon(s)
        try:
            scenarios(s, base, py, "_daemon")
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)
    finally:
        s.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
