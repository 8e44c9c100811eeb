"""Benchmark the calico CNI plugin: ADD and DEL latency, sequential and 20-way concurrent.

Runs the installed launchers exactly as a runtime does (CNI_* env + netconf on stdin, one
process per call) against real network namespaces and a fresh local (SQLite) datastore. The
whole run happens inside a throwaway "host" namespace (root needed), so the real host is
untouched.

Each scenario runs in-process (every call imports and does everything itself; metrics without
a suffix) and through the resident helper ``calico component cni daemon`` started for the run
(metrics ending ``_daemon``).

Baselines, measured in the same run: with ``--before PYTHON`` (an interpreter whose ``calico``
is the code to compare against, e.g. ``/work/cni-baseline/.venv/bin/python`` of a worktree of
main), every scenario also runs on that code, call by call alternating with this one, and each
line's ``baseline`` is the before-code's figure for the same metric. Without it the baseline is
creating and deleting one netns-crossing veth pair with ``ip`` (a process start plus the
kernel work every ADD must do anyway). Every line also carries that veth figure and a bare
interpreter start, which bounds from below what any Python plugin can reach.

Targets (issue 13): without the helper, ADD p50 <= 150 ms and 20 concurrent ADDs all
succeeding with p99 <= 2 s; with it, ADD p50 <= 50 ms and 20-concurrent p99 <= 1 s. Lines with
a target say ``target_ms`` and ``met``; the last line (``metric: "targets"``) sums them up.
"""

from __future__ import annotations

import argparse
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import emit

INNER = "CALICO_BENCH_CNI_INNER"
BENCH = "cni"
N = 20
# metric -> limit in ms (the p99 of the concurrent runs also needs every call to succeed)
TARGETS = {
    "add_p50_seq_ms": 150.0,
    "add_p99_conc20_ms": 2000.0,
    "add_p50_seq_daemon_ms": 50.0,
    "add_p99_conc20_daemon_ms": 1000.0,
}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--before", metavar="PYTHON", default="",
                        help="interpreter whose calico is the code to compare against")  # fmt: skip
    args = parser.parse_args()
    if os.environ.get(INNER) == "1":
        return run(Path(os.environ["CALICO_BENCH_CNI_TMP"]), args.before)
    if os.geteuid() != 0:
        print("bench_cni needs root (network namespaces)", file=sys.stderr)
        return 1
    if args.before and not os.access(args.before, os.X_OK):
        print(f"bench_cni: --before {args.before} is not an executable", file=sys.stderr)
        return 1
    host = f"bcnihost-{uuid.uuid4().hex[:8]}"
    ip("netns", "add", host)
    try:
        ip("-n", host, "link", "set", "lo", "up")
        with tempfile.TemporaryDirectory(prefix="bench-cni-") as tmp:
            env = dict(os.environ, **{INNER: "1", "CALICO_BENCH_CNI_TMP": tmp})
            cmd = ["ip", "netns", "exec", host, sys.executable, __file__, *sys.argv[1:]]
            return subprocess.run(cmd, env=env, timeout=1800).returncode
    finally:
        subprocess.run(["ip", "netns", "del", host], capture_output=True)


class Setup:
    """One code version under test: its launchers, its own datastore, its daemon socket."""

    def __init__(self, tmp: Path, python: str, tag: str, pool_cidr: str) -> None:
        from calico.api.ipam import IPPool
        from calico.datastore.client import Client
        from calico.datastore.config import DatastoreConfig
        from calico.datastore.factory import open_backend

        self.tmp = tmp
        self.python = python
        # Versions share the host netns: distinct container IDs (host veth names derive from
        # them) and pools (host routes) keep them apart.
        self.tag = tag
        self.bin = tmp / "bin"
        self.db = tmp / "calico.db"
        tmp.mkdir(parents=True, exist_ok=True)
        # Each version installs its own launchers, as its own installer writes them.
        code = (
            "import sys; from calico.cni.install import InstallOptions, install; "
            f"install(InstallOptions(conf_dir={str(tmp / 'net.d')!r}, "
            f"bin_dir={str(self.bin)!r}, python=sys.executable, nodename='bench-node'))"
        )
        subprocess.run([python, "-P", "-c", code], check=True, cwd=tmp, capture_output=True)
        client = Client(open_backend(DatastoreConfig(local_path=str(self.db))))
        pool = IPPool.model_validate({"metadata": {"name": "p"}, "spec": {"cidr": pool_cidr}})
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
        self.cpu: list[float] = []  # CPU seconds of every call so far

    def workload_ns(self) -> str:
        name = f"bcniwl-{uuid.uuid4().hex[:10]}"
        ip("netns", "add", name)
        self.namespaces.append(name)
        return name

    def call(self, command: str, cid: str, ns: str) -> float | None:
        """Seconds one call took (its CPU seconds are added to ``self.cpu``), or None when it
        failed. CPU time comes from wait4(): unlike wall time it barely moves with load."""
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
        # cwd: a neutral directory, as a runtime's; "python -c" puts the cwd on sys.path, so
        # run from a checkout it would import that checkout's calico instead of the venv's.
        proc = subprocess.Popen([str(self.bin / "calico")], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                cwd=self.tmp)  # fmt: skip
        assert proc.stdin and proc.stdout and proc.stderr
        proc.stdin.write(self.netconf)
        proc.stdin.close()
        out, err = proc.stdout.read(), proc.stderr.read()  # small: log level is warning
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        proc.stdout.close()
        proc.stderr.close()
        self.cpu.append(usage.ru_utime + usage.ru_stime)
        if proc.returncode != 0:
            print(f"{command} {cid} failed: {out!r} {err[-500:]!r}", file=sys.stderr)
            return None
        return elapsed

    def warm(self) -> None:
        """One ADD first: it claims the node's block and creates the network's profile, as
        the first pod on a node does; the measured calls are the steady state."""
        if self.call("ADD", f"{self.tag}warm", self.workload_ns()) is None:
            raise RuntimeError("the warm-up ADD failed")

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


def python_start(python: str, reps: int = 5) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        subprocess.run([python, "-c", "pass"], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class Run:
    """Both versions' results of one scenario family, measured interleaved."""

    def __init__(self, versions: dict[str, Setup]) -> None:
        self.versions = versions
        self.results: dict[str, dict[str, tuple[list[float], int, float]]] = {
            v: {} for v in versions
        }
        self.cpu: dict[str, dict[str, list[float]]] = {v: {} for v in versions}

    def sequential(self, suffix: str) -> None:
        nss = {v: [s.workload_ns() for _ in range(N)] for v, s in self.versions.items()}
        for verb in ("ADD", "DEL"):
            lat: dict[str, list[float]] = {v: [] for v in self.versions}
            failed = dict.fromkeys(self.versions, 0)
            for s in self.versions.values():
                s.cpu.clear()
            for i in range(N):  # alternate versions call by call: both see the same load
                for v, s in self.versions.items():
                    t = s.call(verb, f"{s.tag}seq{'d' if suffix else ''}{i}", nss[v][i])
                    if t is None:
                        failed[v] += 1
                    else:
                        lat[v].append(t)
            for v, s in self.versions.items():
                self.results[v][f"{verb.lower()}_seq{suffix}"] = (lat[v], failed[v], 0.0)
                self.cpu[v][f"{verb.lower()}_seq{suffix}"] = list(s.cpu)

    def concurrent(self, suffix: str) -> None:
        for v, s in self.versions.items():
            jobs = [(f"{s.tag}conc{'d' if suffix else ''}{i}", s.workload_ns()) for i in range(N)]
            for verb in ("ADD", "DEL"):
                s.cpu.clear()
                with ThreadPoolExecutor(N) as pool:
                    start = time.perf_counter()
                    got = list(pool.map(lambda j, s=s, verb=verb: s.call(verb, *j), jobs))
                    wall = time.perf_counter() - start
                lat = [t for t in got if t is not None]
                self.results[v][f"{verb.lower()}_conc20{suffix}"] = (lat, N - len(lat), wall)
                self.cpu[v][f"{verb.lower()}_conc20{suffix}"] = list(s.cpu)


def start_daemon(s: Setup) -> subprocess.Popen[bytes]:
    sock = s.tmp / "cni-daemon.sock"
    proc = subprocess.Popen(
        [s.python, "-c", "from calico.cli.main import main; main()", "component", "cni",
         "daemon", "--socket", str(sock)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=s.tmp,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the CNI daemon did not start")
        time.sleep(0.05)
    s.daemon_socket = str(sock)
    return proc


def report(run: Run, veth: float, py: dict[str, float]) -> None:
    before = run.results.get("before", {})
    met: dict[str, bool] = {}
    for scenario, (lat, failed, wall) in run.results["after"].items():
        for q, name in ((0.5, "p50"), (0.99, "p99")):
            verb, kind = scenario.split("_", 1)
            metric = f"{verb}_{name}_{kind}_ms"
            value = pct(lat, q) * 1000 if lat else float("inf")
            extra: dict[str, Any] = {"n": len(lat), "failed": failed}
            cpu = run.cpu["after"][scenario]
            extra["cpu_ms"] = round(pct(cpu, q) * 1000, 1)  # the calls' own CPU, same quantile
            if wall:
                extra["wall_s"] = round(wall, 2)
            if metric in TARGETS:
                ok = value <= TARGETS[metric] and failed == 0
                extra.update(target_ms=TARGETS[metric], met=ok)
                met[metric] = ok
            extra.update(
                veth_ip_ms=round(veth * 1000, 1), python_start_ms=round(py["after"] * 1000, 1)
            )
            if scenario in before:
                blat, bfailed, bwall = before[scenario]
                base = pct(blat, q) * 1000 if blat else float("inf")
                extra.update(baseline_is="before", before_failed=bfailed)
                extra["before_cpu_ms"] = round(pct(run.cpu["before"][scenario], q) * 1000, 1)
                if bwall:
                    extra["before_wall_s"] = round(bwall, 2)
            else:
                base = veth * 1000
                extra["baseline_is"] = "veth_ip"
            emit(BENCH, metric, value, base, **extra)
    emit(BENCH, "targets", float(sum(met.values())), float(len(met)), met=met, targets_ms=TARGETS)


def run(tmp: Path, before: str) -> int:
    versions = {"after": Setup(tmp / "after", sys.executable, "a", "10.88.0.0/16")}
    if before:
        versions["before"] = Setup(tmp / "before", before, "b", "10.89.0.0/16")
    r = Run(versions)
    try:
        veth = veth_baseline(versions["after"])
        py = {v: python_start(s.python) for v, s in versions.items()}
        for s in versions.values():
            s.warm()
        r.sequential("")
        r.concurrent("")
        daemons = [start_daemon(s) for s in versions.values()]
        try:
            r.sequential("_daemon")
            r.concurrent("_daemon")
        finally:
            for d in daemons:
                d.terminate()
                d.wait(timeout=30)
        report(r, veth, py)
    finally:
        for s in versions.values():
            s.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
