"""Benchmark Felix end to end against the real kernel (root needed).

Uses the Felix test harness (a "host" netns running ``calico component felix``, workload netns on
``cali*`` veths, resources written to a temp local datastore). Three measurements:

1. Time to first response (TTFR; ``--ttfr-only`` runs only this, ``--stages`` adds per-stage
   medians stamped inside Felix, see ``benchmarks/ttfr_stages/sitecustomize.py``):
   100 standing policies (99 ingress policies over 10 label
   groups + one that lets ``role == 'client'`` reach the server); 100 new workloads, their veths
   made beforehand as the CNI plugin does (host-side proxy-ARP sysctls included), get their
   WorkloadEndpoint written at 10/s. Per workload: time from just before the WEP write to the
   first successful TCP connect to the server (a prober thread inside the workload's netns
   starts a fresh non-blocking connect every 0.25 ms, ``--probe-every MS`` to change it, so the
   resolution is ~0.25 ms; it was 1 ms before session 6). Baseline: a
   connect from a workload Felix has already programmed. Targets (issue 23): p50 <= 3 ms,
   p99 <= 11 ms. ``--large`` (implies ``--ttfr-only``): the same with 1,000 standing policies
   and 10,000 remote endpoints (50 other nodes, labels over the policies' source selectors, so
   their IP sets hold ~1,400 members each) in the datastore before Felix starts
   (``ttfr_large_*``; target p99 <= 20 ms). ``--bpf``: Felix with ``BPFEnabled=true``
   (``bpf_ttfr_*``; probers wait 40 s, as on a cold object cache the first workload of each
   policy set waits for clang on the dataplane thread). The bench also reports workloads 1-9
   (``first_in_group_*``: each activates its label group's policies) apart from the rest.
2. Cold apply: Felix stopped, its table and workload routes deleted, 100 local endpoints x 100
   policies in the datastore; time from process start to "Dataplane in sync" (also reported:
   the first apply alone). Baseline: loading the resulting ruleset (as ``nft -j list`` shows it)
   in one libnftables ``json_cmd`` into an empty netns. Target <= 1 s. Then a restart with the
   table left in place (``restart_unchanged_s``, baseline the cold start): no rule may be
   rewritten (``rules_rewritten``, by rule handle). ``--cold-only`` runs just these two;
   ``--cold-compare DIR`` alternates them with an older tree; ``--metrics-off`` (with either)
   starts Felix with PrometheusMetricsEnabled at its default, false (the harness enables it);
   ``--real-config`` (with either) also stores what every real cluster has, calico-node's
   FelixConfiguration ``default`` and this host's Node. Each start reports whether the Felix
   process had pydantic loaded when ready (``pydantic``: its ``pydantic_core`` library mapped).
3. Throughput: iperf3 between two workloads with 1,000 policies applying to the server vs none.
   Value is the with-policy rate, baseline the no-policy rate. Target ratio >= 0.95.
   ``--tput-only`` runs just this.
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import datetime
import importlib.util
import json
import os
import re
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import felix_shapes  # noqa: E402  (benchmarks/felix_shapes.py)
from harness import emit  # noqa: E402  (benchmarks/harness.py)


def _load_felix_harness() -> Any:
    """The Felix test harness, loaded by path (its module name clashes with ours)."""
    path = ROOT / "tests" / "integration" / "felix" / "dataplane" / "harness.py"
    sys.path.insert(0, str(ROOT / "tests"))  # its shared netns_support module
    spec = importlib.util.spec_from_file_location("felix_harness", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["felix_harness"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


fh = _load_felix_harness()

BENCH = "felix"
N_NEW = 100
RATE = 10.0  # WEP writes per second
N_POLICIES = 100
N_TPUT_POLICIES = 1000
TPUT_PAIRS = 5
PORT = 8080
# The probers' period between fresh connects (``--probe-every MS`` sets it): a workload's
# reported TTFR includes, on average, half of it after the path opens.
PROBE_EVERY = 0.00025
NAMESPACE = "bench"
CLONE_NEWNET = 0x40000000
# Production refresh/report intervals (the test harness shortens them to exercise resyncs).
FELIX_ENV = {
    "FELIX_NFTABLESREFRESHINTERVAL": "180",
    "FELIX_ROUTEREFRESHINTERVAL": "90",
    "FELIX_REPORTINGINTERVALSECS": "30",
}
_libc = ctypes.CDLL(None, use_errno=True)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ip_batch(lines: list[str], ns: str | None = None) -> None:
    args = ["ip", *(["-n", ns] if ns else []), "-batch", "-"]
    subprocess.run(args, input="\n".join(lines) + "\n", text=True, check=True, timeout=120)


def enter_netns(name: str) -> None:
    """Move the calling thread (only) into netns ``name``; sockets it opens stay there."""
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {name}")
    finally:
        os.close(fd)


def try_connect(dst: str, port: int, timeout: float) -> bool:
    s = socket.socket()
    s.settimeout(timeout)
    try:
        s.connect((dst, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


class Prober(threading.Thread):
    """Inside ``ns``: once ``go`` is set, start a fresh non-blocking connect to ``dst`` every
    ``every`` seconds until one completes; ``done`` is the perf_counter of the first success
    (None if ``limit`` seconds pass first). A new SYN each period, not retries of a blocking
    connect, is what keeps the measurement's resolution at the period: a dropped SYN is only
    retransmitted after 1 s. Completions are looked for once per period too. Attempts older
    than ``STALE`` are abandoned (a SYN dropped before the path opened never completes; a
    SYN-ACK takes ~0.1 ms once it is open)."""

    STALE = 0.05

    def __init__(
        self, ns: str, dst: str, port: int = PORT, limit: float = 10.0, every: float | None = None
    ) -> None:
        super().__init__(daemon=True)
        self.ns, self.dst, self.port, self.limit = ns, dst, port, limit
        self.every = PROBE_EVERY if every is None else every
        self.ready, self.go = threading.Event(), threading.Event()
        self.done: float | None = None

    def run(self) -> None:
        enter_netns(self.ns)
        self.ready.set()
        self.go.wait()
        sel = selectors.DefaultSelector()
        try:
            self._probe(sel)
        finally:
            for key in list(sel.get_map().values()):
                key.fileobj.close()  # type: ignore[union-attr]
            sel.close()

    def _probe(self, sel: selectors.BaseSelector) -> None:
        # Sleep between looks, not a select timeout: epoll's timeout is whole milliseconds, so
        # a 0.25 ms select wait would be a 1 ms one. A completion is seen at the next look.
        now = time.perf_counter()
        end, next_try = now + self.limit, now
        while now < end:
            if now >= next_try:
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex((self.dst, self.port))
                sel.register(s, selectors.EVENT_WRITE, now)
                next_try = now + self.every
            for key, _ in sel.select(0):
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    self.done = time.perf_counter()
                    return
                sel.unregister(sock)
                sock.close()
            now = time.perf_counter()
            for key in [k for k in sel.get_map().values() if now - k.data > self.STALE]:
                sel.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]
            time.sleep(max(0.0, min(next_try, end) - now))
            now = time.perf_counter()


def connect_times(ns: str, dst: str, n: int = 50) -> list[float]:
    """``n`` timed connects from ``ns`` (run in a thread that entered it)."""
    out: list[float] = []

    def body() -> None:
        enter_netns(ns)
        for _ in range(n):
            start = time.perf_counter()
            if try_connect(dst, PORT, 1.0):
                out.append(time.perf_counter() - start)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(60)
    return out


# --- environment --------------------------------------------------------------------------------


def real_cluster_config() -> list[dict[str, Any]]:
    """calico-node's first-start documents for this host (its uplink address), as
    ``bench_felix_startup_read.py`` stores them."""
    return felix_shapes.real_cluster_config(
        fh.HOSTNAME, f"{fh.HOST_UPLINK_IP}/24", fh.HOST_UPLINK_IP
    )


def pydantic_loaded(pid: int) -> bool:
    """Whether the process has imported pydantic (its compiled core is mapped)."""
    return "pydantic_core" in Path(f"/proc/{pid}/maps").read_text()


@contextlib.contextmanager
def host_env(tag: str) -> Iterator[tuple[str, Any, Any, Path]]:
    """Host + outside netns (uplink with default route, so proxy ARP answers), a temp
    datastore with the pool and namespace profile, and a (not yet started) Felix."""
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-felix-{tag}-"))
    with fh.netns("fxbh") as host, fh.netns("fxbx") as outside:
        fh.host_netns_setup(host, outside)
        ds = fh.Datastore(str(workdir / "calico.db"))
        felix = fh.Felix(host, workdir, env=dict(FELIX_ENV))
        if "--metrics-off" in sys.argv[1:]:  # Felix's default (the harness turns them on)
            felix.env["FELIX_PROMETHEUSMETRICSENABLED"] = "false"
        try:
            ds.apply({"kind": "IPPool", "metadata": {"name": "p"}, "spec": {"cidr": fh.POOL}})
            fh.namespace_profile(ds, NAMESPACE)
            if "--real-config" in sys.argv[1:]:
                for doc in real_cluster_config():
                    ds.apply(doc)
            yield host, ds, felix, workdir
        finally:
            felix.kill()
            if (keep := os.environ.get("BENCH_PYSPY_DIR")) and felix.log_path.exists():
                shutil.copy(felix.log_path, Path(keep) / f"felix-{tag}.log")  # for the profile
            ds.close()
            shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def bulk_workloads(host: str, prefix: str, n: int, labels_of: Any) -> Iterator[list[Any]]:
    """``n`` workload netns + veths made in a few ``ip -batch`` runs, CNI-style host sysctls
    applied; no WEPs written. Deleted (netns and veths) on exit."""
    ws = []
    for i in range(n):
        name = f"{prefix}{i}"
        ns = f"fxb-{prefix}{i}-{os.getpid() % 10000}"
        mac = f"02:fb:00:00:{i // 256:02x}:{i % 256:02x}"
        ip = f"10.65.{10 + i // 250}.{1 + i % 250}"
        iface = fh.iface_name(NAMESPACE, name)
        ws.append(fh.Workload(name, ns, NAMESPACE, iface, ip, mac, labels_of(i)))
    try:
        ip_batch([f"netns add {w.ns}" for w in ws])
        ip_batch(
            [
                f"link add {w.iface} netns {host} type veth peer eth0 address {w.mac} netns {w.ns}"
                for w in ws
            ]
        )
        for w in ws:
            ip_batch(
                [
                    "link set lo up",
                    "link set eth0 up",
                    f"addr add {w.ip}/32 dev eth0",
                    "route add 169.254.1.1 dev eth0 scope link",
                    "route add default via 169.254.1.1 dev eth0",
                ],
                ns=w.ns,
            )
        ip_batch([f"link set {w.iface} up" for w in ws], ns=host)
        sysctls = []
        for w in ws:
            sysctls += [
                f"net.ipv4.conf.{w.iface}.proxy_arp=1",
                f"net.ipv4.neigh.{w.iface}.proxy_delay=0",
                f"net.ipv4.conf.{w.iface}.forwarding=1",
            ]
        fh.in_ns(host, "sysctl", "-q", "-w", *sysctls)
        yield ws
    finally:
        subprocess.run(
            ["ip", "-force", "-batch", "-"],
            input="".join(f"netns del {w.ns}\n" for w in ws),
            text=True,
            capture_output=True,
            check=False,
        )


def standing_policies(n: int) -> list[dict[str, Any]]:
    """The server's policy (clients to ``PORT``) and ``n - 1`` noise policies."""
    return felix_shapes.standing_policies(n, PORT, NAMESPACE)


client_labels = felix_shapes.client_labels


N_LARGE_POLICIES = 1000
N_REMOTE = 10_000
REMOTE_PER_NODE = 200
STAMP = "2026-01-01T00:00:00Z"


def remote_endpoint(i: int) -> dict[str, Any]:
    """Remote endpoint ``i`` on node ``rnode<i // 200>``: ``role`` over the noise policies'
    seven source selectors (so each of their IP sets has ~1,400 members), ``group`` over the
    ten groups (so the local policy selectors' label index holds them too)."""
    node = f"rnode{i // REMOTE_PER_NODE}"
    pod = f"r{i}"
    labels = {
        "role": f"r{i % 7}",
        "group": f"g{i % 10}",
        "projectcalico.org/namespace": NAMESPACE,
        "projectcalico.org/orchestrator": "k8s",
    }
    spec = {
        "orchestrator": "k8s",
        "workload": pod,
        "pod": pod,
        "node": node,
        "endpoint": "eth0",
        "interfaceName": f"cali{i:011d}",
        "ipNetworks": [f"10.66.{i // 250}.{1 + i % 250}/32"],
        "profiles": [f"kns.{NAMESPACE}"],
    }
    meta = {"name": f"{node}-k8s-{pod}-eth0", "namespace": NAMESPACE, "labels": labels}
    return {"kind": "WorkloadEndpoint", "metadata": meta, "spec": spec}


def store_remote_endpoints(ds: Any, n: int) -> None:
    """``n`` remote endpoints in the stored form ``Client.apply`` writes, 1,000 keys per
    transaction (one WEP at a time through the client would take minutes). Every 1,000th is
    also parsed through the models and checked equal, so the fast path cannot drift."""
    from calico.api import parse_resource, resource_to_wire
    from calico.datastore.client import resource_path

    batch: list[tuple[str, str]] = []
    for i in range(n):
        doc = {"apiVersion": "projectcalico.org/v3", **remote_endpoint(i)}
        meta = {**doc["metadata"], "creationTimestamp": STAMP, "uid": f"remote-{i}"}
        doc["metadata"] = meta
        if i % 1000 == 0:
            wire = resource_to_wire(parse_resource(doc))
            wire["metadata"].pop("resourceVersion", None)
            if wire != json.loads(json.dumps(doc)):
                raise AssertionError(f"remote endpoint {i} differs from Client.apply's form")
        path = resource_path("WorkloadEndpoint", meta["name"], NAMESPACE)
        batch.append((path, json.dumps(doc, separators=(",", ":"), sort_keys=True)))
        if len(batch) == 1000:
            ds.backend.apply_many(batch)
            batch = []
    if batch:
        ds.backend.apply_many(batch)


# --- 1 + 2: TTFR, then cold apply on the same endpoints -----------------------------------------


def bench_ttfr_and_cold_apply(
    cold: bool = True, stages: Path | None = None, large: bool = False, bpf: bool = False
) -> None:
    """TTFR, then (``cold``) cold start and unchanged restart on the same endpoints.
    ``stages``: where the Felix child writes its stage stamps (``--stages``); ``large``: 1,000
    policies and 10,000 remote endpoints standing (``--large``); ``bpf``: BPF dataplane."""
    n_policies = N_LARGE_POLICIES if large else N_POLICIES
    prefix = ("bpf_" if bpf else "") + ("ttfr_large" if large else "ttfr")
    with host_env("ttfr") as (host, ds, felix, _):
        if bpf:
            felix.env["FELIX_BPFENABLED"] = "true"
        for doc in standing_policies(n_policies):
            ds.apply(doc)
        if large:
            store_remote_endpoints(ds, N_REMOTE)
        with (
            fh.workload(host, ds, "server", "10.65.0.2", namespace=NAMESPACE,
                        labels={"app": "server"}) as server,
            fh.workload(host, ds, "warm", "10.65.0.3", namespace=NAMESPACE,
                        labels=client_labels(0)) as warm,
            fh.servers(server, f"tcp:{PORT}"),
            bulk_workloads(host, "c", N_NEW + 1, client_labels) as made,
        ):  # fmt: skip
            felix.start()
            felix.wait_ready(120 if large else 40)
            fh.eventually(lambda: try_connect_from(warm.ns, server.ip), True, timeout=60)
            if bpf and "BPF dataplane enabled" not in felix.log_path.read_text():
                raise AssertionError("--bpf: Felix did not enable its BPF dataplane")
            base = connect_times(warm.ns, server.ip)
            new, unwritten = made[:N_NEW], made[N_NEW]
            # Control: a workload whose WEP is never written must never connect.
            control = Prober(unwritten.ns, server.ip, limit=N_NEW / RATE + 1, every=0.005)
            # BPF mode compiles a program per new policy set (clang, seconds under load) on
            # the dataplane thread, so later workloads queue behind it: wait longer there.
            limit = 40.0 if bpf else 10.0
            probers = [Prober(w.ns, server.ip, limit=limit) for w in new]
            control.start()
            control.ready.wait(5)
            control.go.set()
            for p in probers:
                p.start()
                p.ready.wait(5)
            spy = profile_felix(felix, "ttfr", N_NEW / RATE + 2)
            cpu_before = process_cpu_s(felix.proc.pid)
            bench_before = time.process_time()
            threads_before = thread_cpu_s(felix.proc.pid)
            starts: list[float] = []
            writes: list[float] = []
            write_cpu: list[float] = []
            t_base = time.perf_counter()
            for i, (w, p) in enumerate(zip(new, probers, strict=True)):
                delay = t_base + i / RATE - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                t0, c0 = time.perf_counter(), time.thread_time()
                ds.apply(fh.wep_doc(w))
                writes.append(time.perf_counter() - t0)
                write_cpu.append(time.thread_time() - c0)
                # Probing starts once the write returns, so the prober's wake-ups do not take
                # the bench's GIL from the write; the path cannot open before the commit, and
                # a first probe that succeeds at once still bounds the time from above.
                p.go.set()
                starts.append(t0)
            for p in [*probers, control]:
                p.join(limit + 5)
            felix_cpu = process_cpu_s(felix.proc.pid) - cpu_before
            bench_cpu = time.process_time() - bench_before
            threads_after = thread_cpu_s(felix.proc.pid)
            if spy is not None:
                spy.wait(60)
            ttfr = [p.done - t0 for p, t0 in zip(probers, starts, strict=True) if p.done]
            failed = N_NEW - len(ttfr)
            extra = {
                "n": N_NEW,
                "failed": failed,
                "control_connected": control.done is not None,
                "policies": n_policies,
                "remote_endpoints": N_REMOTE if large else 0,
                "dataplane": "bpf" if bpf else "nftables",
                "wep_write_p50_s": round(pct(writes, 0.5), 6),
                "wep_write_p99_s": round(pct(writes, 0.99), 6),
                # the writing thread's CPU (parse, validate, encode, SQLite): wall minus this
                # is waiting (a core, the GIL, a lock, the disk)
                "wep_write_cpu_p50_s": round(pct(write_cpu, 0.5), 6),
                # Felix's CPU (all threads) over the writes, per workload: load moves it far
                # less than the wall-clock percentiles.
                "felix_cpu_ms_per_workload": round(1000 * felix_cpu / N_NEW, 3),
                # The bench process's own CPU over the writes (probers, writes): what the finer
                # prober costs the machine Felix shares.
                "bench_cpu_ms_per_workload": round(1000 * bench_cpu / N_NEW, 3),
                "probe_every_ms": PROBE_EVERY * 1000,
                "max_s": round(max(ttfr), 4) if ttfr else None,
                # (workload index, seconds) of the slowest three: first ones vs load spikes
                "slowest": sorted(
                    (
                        (i, round(p.done - t0, 4))
                        for i, (p, t0) in enumerate(zip(probers, starts, strict=True))
                        if p.done
                    ),
                    key=lambda it: -it[1],
                )[:3],
            }
            # Workloads 1-9 are the first of their label group (the warm one is in g0): each
            # activates its group's policies (10 of 100, 100 of 1,000), the rest only join.
            times = [
                p.done - t0 if p.done else float("inf")
                for p, t0 in zip(probers, starts, strict=True)
            ]
            first, steady = times[1:10], times[:1] + times[10:]
            extra["first_in_group_p50_s"] = round(pct(first, 0.5), 4)
            extra["first_in_group_max_s"] = round(max(first), 4)
            extra["steady_p50_s"] = round(pct(steady, 0.5), 4)
            extra["steady_p99_s"] = round(pct(steady, 0.99), 4)
            if stages is not None:
                extra["stages_p50_ms"] = stage_breakdown(stages, starts, probers)
                # the policy-activating workloads 1-9 alone
                extra["stages_first_p50_ms"] = stage_breakdown(
                    stages, starts, probers, range(1, 10)
                )
                extra["gc"] = gc_in_paths(stages, starts, probers)
                # the tail: where the slowest three spent their time
                extra["stages_slowest_ms"] = {
                    i: stage_breakdown(stages, starts, probers, range(i, i + 1))
                    for i, _ in extra["slowest"]
                }
                extra["thread_cpu_ms_per_workload"] = thread_cpu_by_name(
                    stages, felix.proc.pid, threads_before, threads_after, N_NEW
                )
            ttfr += [float("inf")] * failed
            b50 = statistics.median(base)
            p50_target, p99_target = (None, 0.020) if large else (0.003, 0.011)
            emit(BENCH, f"{prefix}_p50_s", pct(ttfr, 0.5), b50, target=p50_target, **extra)
            emit(BENCH, f"{prefix}_p99_s", pct(ttfr, 0.99), b50, target=p99_target, **extra)
            if not cold:
                return

            # Cold start: exactly 100 local endpoints (server + warm + 98 new).
            for w in new[N_NEW - 2 :]:
                ds.delete("WorkloadEndpoint", w.wep_name, NAMESPACE)
            bench_cold_and_restart(host, felix)


@contextlib.contextmanager
def cold_start_shape(host: str, ds: Any) -> Iterator[None]:
    """The cold-start shape in the datastore and the host: 100 standing policies and exactly
    100 local endpoints (server, warm and 98 clients), removed on exit."""
    for doc in standing_policies(N_POLICIES):
        ds.apply(doc)
    with (
        fh.workload(host, ds, "server", "10.65.0.2", namespace=NAMESPACE,
                    labels={"app": "server"}),
        fh.workload(host, ds, "warm", "10.65.0.3", namespace=NAMESPACE,
                    labels=client_labels(0)),
        bulk_workloads(host, "c", N_NEW - 2, client_labels) as made,
    ):  # fmt: skip
        for w in made:
            ds.apply(fh.wep_doc(w))
        yield


def bench_cold_only() -> None:
    """``--cold-only``: the cold start and restart measurements without the TTFR run before
    them (same 100 endpoints x 100 policies, same Felix settings), for profiling start-up."""
    with host_env("cold") as (host, ds, felix, _), cold_start_shape(host, ds):
        felix.start()
        felix.wait_ready(60)  # a first start writes the bytecode cache of everything
        bench_cold_and_restart(host, felix)


def bench_cold_compare(old_tree: Path, rounds: int) -> None:
    """``--cold-compare DIR [--rounds N]``: the cold start and the unchanged restart, ``rounds``
    times each for the tree in DIR (an older ``calico`` checkout, first on the child's
    ``PYTHONPATH``) and for this one, alternating in the same minutes (load moves the figures
    2x from one minute to the next, so only alternating pairs compare). One line per start, then
    min / median / max of CPU and wall per tree and kind. ``BENCH_FELIX_LOG_DIR`` keeps each
    start's Felix log (e.g. with ``PYTHONPROFILEIMPORTTIME=1`` for the import tree)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(old_tree / "calico")], check=True)
    keep = os.environ.get("BENCH_FELIX_LOG_DIR")
    base_path = os.environ.get("PYTHONPATH")
    trees = {"old": str(old_tree), "new": None}
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with host_env("cmp") as (host, ds, felix, _), cold_start_shape(host, ds):
        for tree in trees.values():  # warm-up: page cache, bytecode of both trees
            set_child_path(felix, tree, base_path)
            felix.start()
            felix.wait_ready(60)
            felix.stop()
        for rnd in range(rounds):
            order = list(trees.items()) if rnd % 2 == 0 else list(trees.items())[::-1]
            for name, tree in order:
                set_child_path(felix, tree, base_path)
                for kind in ("cold", "restart"):
                    if kind == "cold":
                        fh.in_ns(host, "nft", "delete", "table", "inet", "calico")
                        fh.in_ns(host, "ip", "route", "flush", "root", fh.POOL)
                    before = rule_handles(host) if kind == "restart" else set()
                    t_start = time.time()
                    felix.start()
                    felix.wait_ready(60)
                    cpu = process_cpu(felix.proc.pid)
                    phases = timeline(felix.log_path, t_start)
                    extra: dict[str, Any] = {"pydantic": pydantic_loaded(felix.proc.pid)}
                    if kind == "restart":
                        after = rule_handles(host)
                        extra |= {"rules": len(before), "rules_rewritten": len(before - after)}
                    felix.stop()
                    if keep:
                        shutil.copy(felix.log_path, Path(keep) / f"{name}-{kind}-{rnd}.log")
                    results.setdefault((name, kind), []).append((cpu, phases["in_sync"]))
                    print(json.dumps({"round": rnd, "tree": name, "start": kind,
                                      "cpu_to_ready_s": cpu, "phases": phases, **extra}),
                          flush=True)  # fmt: skip
    for kind in ("cold", "restart"):
        old = results[("old", kind)]
        new = results[("new", kind)]
        emit(
            BENCH,
            f"{kind}_compare_cpu_to_ready_s",
            statistics.median(c for c, _ in new),
            statistics.median(c for c, _ in old),
            target=1.0,
            rounds=rounds,
            baseline_is=f"the tree in {old_tree}, alternating with this one",
            **{f"{t}_{m}": spread([r[i] for r in results[(t, kind)]])
               for t in trees for i, m in ((0, "cpu"), (1, "wall"))},
        )  # fmt: skip


def set_child_path(felix: Any, tree: str | None, base: str | None) -> None:
    """Felix's ``PYTHONPATH``: ``tree`` first (so its ``calico`` wins over the editable
    install, whose finder comes after the path), then what the bench itself was given."""
    paths = [p for p in (tree, base) if p]
    if paths:
        felix.env["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        felix.env.pop("PYTHONPATH", None)


def spread(values: list[float]) -> dict[str, float]:
    return {
        "min": min(values),
        "median": round(statistics.median(values), 3),
        "max": max(values),
    }


def bench_cold_and_restart(host: str, felix: Any) -> None:
    """Felix stopped, its table and workload routes deleted, started again: time to "Dataplane
    in sync"; then a restart with the table left in place, which must rewrite nothing."""
    felix.stop()
    fh.in_ns(host, "nft", "delete", "table", "inet", "calico")
    fh.in_ns(host, "ip", "route", "flush", "root", fh.POOL)
    t_start = time.time()
    felix.start()
    spy = profile_felix(felix, "cold", 30)
    felix.wait_ready(60)
    cold_cpu = process_cpu(felix.proc.pid)
    phases = timeline(felix.log_path, t_start)
    if spy is not None:
        spy.wait(60)
    ruleset = nft_ruleset_commands(host)  # what the cold start programmed
    chains = sum(1 for c in ruleset if "chain" in c["add"])
    emit(
        BENCH,
        "cold_apply_s",
        phases["in_sync"],
        nft_load_time(ruleset),
        target=1.0,
        phases=phases,
        endpoints=N_NEW,
        policies=N_POLICIES,
        chains=chains,
        cpu_to_ready_s=cold_cpu,
    )

    # Restart with the table left in place: nothing may be rewritten.
    before = rule_handles(host)
    felix.stop()
    t_start = time.time()
    felix.start()
    felix.wait_ready(60)
    restart_cpu = process_cpu(felix.proc.pid)
    restart = timeline(felix.log_path, t_start)
    after = rule_handles(host)
    emit(
        BENCH,
        "restart_unchanged_s",
        restart["in_sync"],
        phases["in_sync"],
        target=1.0,
        phases=restart,
        rules=len(before),
        rules_rewritten=len(set(before) - set(after)),
        baseline_is="cold start of the same Felix, same run",
        cpu_to_ready_s=restart_cpu,
    )


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) ``pid`` has used, read as soon as Felix reports ready
    (health polled every 0.2 s). Load on the shared 2-core machine stretches the wall-clock
    phases 2-3x from one minute to the next; CPU time moves far less."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 3)


def stage_breakdown(
    stage_dir: Path, starts: list[float], probers: list[Any], only: range | None = None
) -> dict[str, float]:
    """Median per stage of a new workload's path, in ms, from the stamps
    ``benchmarks/ttfr_stages/sitecustomize.py`` wrote: for each workload, the first stamp of
    each stage after its write (the nft and route applies: inside the first dataplane apply
    after the hand-over), up to the prober's first connect. ``cpu_*``: the stamping thread's
    CPU over that span (the rest of the span's wall time it waited for the GIL or a core).
    ``only``: the workload indices to include (default all)."""
    spans: dict[str, list[tuple[float, float, float]]] = {}
    for path in stage_dir.glob("felix.*"):
        for line in path.read_text().splitlines():
            if line.startswith(("thread ", "gc ")):
                continue
            stage, start, end, cpu = line.split()
            spans.setdefault(stage, []).append((float(start), float(end), float(cpu)))
    for values in spans.values():
        values.sort()

    def after(stage: str, t: float) -> tuple[float, float, float] | None:
        values = spans.get(stage, [])
        i = bisect.bisect_left(values, (t, 0.0, 0.0))
        return values[i] if i < len(values) else None

    rows: dict[str, list[float]] = {}
    for index, (t0, p) in enumerate(zip(starts, probers, strict=True)):
        if only is not None and index not in only:
            continue
        deliver = after("deliver", t0)
        to_calc = deliver and after("syncer_to_calc", deliver[0])
        calc = to_calc and after("calc_apply", to_calc[0])
        to_dp = calc and after("to_dataplane", calc[0])
        apply = to_dp and after("dp_apply", to_dp[0])
        nft = apply and after("nft_apply", apply[0])
        routes = nft and after("route_apply", nft[1])
        if not (p.done and deliver and to_calc and calc and to_dp and apply):
            continue
        marks = {
            "write_to_watch": deliver[0] - t0,
            "watch_to_calc": calc[0] - deliver[0],
            "calc": calc[1] - calc[0],
            "calc_to_apply": apply[0] - calc[1],
            "apply_start_to_connect": p.done - apply[0],
        }
        # CPU of the dataplane thread over the whole apply, and of the calc graph's apply
        marks |= {"cpu_calc": calc[2], "cpu_dp_apply": apply[2]}
        # The hand-overs in between: watch -> watcher thread (decode, validate, convert) ->
        # syncer's dispatcher -> calc graph; calc graph flush -> dataplane thread.
        convert = after("convert", deliver[0])
        dispatch = convert and after("dispatch", convert[1])
        if convert and dispatch and dispatch[0] <= calc[0]:
            marks |= {
                "hop_watch_to_convert": convert[0] - deliver[1],
                "convert": convert[1] - convert[0],
                "cpu_convert": convert[2],
                "hop_convert_to_dispatch": dispatch[0] - convert[1],
                "hop_dispatch_to_calc": calc[0] - dispatch[0],
            }
        marks |= {"calc_flush": to_dp[0] - calc[1], "hop_to_dataplane": apply[0] - to_dp[0]}
        ep_render = after("ep_render", apply[0])
        if ep_render and ep_render[1] <= apply[1]:
            marks |= {"ep_render": ep_render[1] - ep_render[0], "cpu_ep_render": ep_render[2]}
        status = after("status", apply[0])  # this workload's status files, after its apply
        if status:
            marks |= {"status_after_apply": status[0] - apply[1], "cpu_status": status[2]}
        send = nft and after("nft_send", nft[0])
        if send and send[1] <= nft[1]:  # the netlink batch's send (the kernel's commit in it)
            marks |= {"nft_plan": send[0] - nft[0], "nft_send": send[1] - send[0],
                      "cpu_nft_send": send[2]}  # fmt: skip
        if nft and routes:  # nftables mode (BPF mode stamps no route apply inside its apply)
            marks |= {
                "cpu_nftables": nft[2],
                "cpu_routes": routes[2],
                "render": nft[0] - apply[0],
                "nftables": nft[1] - nft[0],
                "nft_to_routes": routes[0] - nft[1],
                "routes": routes[1] - routes[0],
                "routes_to_connect": p.done - routes[1],
            }
        for name, value in marks.items():
            rows.setdefault(name, []).append(value)
    return {name: round(1000 * statistics.median(v), 3) for name, v in rows.items()}


def gc_in_paths(stage_dir: Path, starts: list[float], probers: list[Any]) -> dict[str, Any]:
    """How much of each workload's path (write to connect) Felix spent collecting garbage,
    from the stamps' ``gc`` lines: is the tail the collector's? Wall time (``gc_ms_total``,
    ``slowest``) includes preemption while the collector held the GIL; ``gc_cpu_ms_total``
    is the collecting threads' CPU."""
    gcs: list[tuple[float, float, int, float]] = []
    for path in stage_dir.glob("felix.*"):
        for line in path.read_text().splitlines():
            if line.startswith("gc "):
                _, start, end, gen, cpu = line.split()
                gcs.append((float(start), float(end), int(gen), float(cpu)))
    in_path: list[tuple[float, float, int]] = []  # (ttfr, gc seconds inside it, oldest gen)
    for t0, p in zip(starts, probers, strict=True):
        if p.done:
            hit = [(min(e, p.done) - max(s, t0), g) for s, e, g, _ in gcs if s < p.done and e > t0]
            oldest = max((g for _, g in hit), default=-1)
            in_path.append((p.done - t0, sum(h for h, _ in hit), oldest))
    in_path.sort(reverse=True)
    span = (min(starts), max(p.done or 0.0 for p in probers))
    during = [c for c in gcs if span[0] <= c[0] <= span[1]]
    return {
        "collections": [sum(1 for c in during if c[2] == gen) for gen in range(3)],
        "gc_ms_total": round(1000 * sum(e - s for s, e, _, _ in during), 3),
        "gc_cpu_ms_total": round(1000 * sum(c[3] for c in during), 3),
        "gc_cpu_ms_by_generation": [
            round(1000 * sum(c[3] for c in during if c[2] == gen), 3) for gen in range(3)
        ],
        "workloads_with_gc": sum(1 for _, h, _ in in_path if h > 0),
        # the slowest five: (ttfr ms, of it collecting ms, oldest generation collected)
        "slowest": [(round(1000 * t, 2), round(1000 * h, 3), g) for t, h, g in in_path[:5]],
    }


def thread_cpu_s(pid: int) -> dict[int, float]:
    """User + system CPU seconds of each of ``pid``'s threads, by thread id."""
    out: dict[int, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            out[int(task.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def thread_cpu_by_name(
    stage_dir: Path, pid: int, before: dict[int, float], after: dict[int, float], n: int
) -> dict[str, float]:
    """Felix's CPU per workload over the writes, ms, by thread name (the ``thread`` lines the
    stamping ``sitecustomize`` wrote; the syncer's per-kind watcher threads summed as
    ``syncer-*``). Ticks are 10 ms, so only threads busy for many workloads show."""
    names = {pid: "main"}
    for path in stage_dir.glob("felix.*"):
        for line in path.read_text().splitlines():
            if line.startswith("thread "):
                _, tid, name = line.split(maxsplit=2)
                names[int(tid)] = name
    out: dict[str, float] = {}
    for tid, cpu in after.items():
        name = names.get(tid, "other")
        name = "syncer-*" if name.startswith("syncer-") else name.split(":", 1)[0]
        out[name] = out.get(name, 0.0) + cpu - before.get(tid, 0.0)
    return {k: round(1000 * v / n, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1]) if v}


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process, all its threads (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def profile_felix(felix: Any, tag: str, seconds: float) -> subprocess.Popen[bytes] | None:
    """With ``BENCH_PYSPY_DIR`` set: py-spy samples the running Felix for ``seconds`` into
    ``<dir>/felix-<tag>.txt`` (collapsed stacks, one line per stack with its sample count);
    ``BENCH_PYSPY_ARGS`` adds py-spy options (``--gil``: only the thread holding the GIL)."""
    out_dir = os.environ.get("BENCH_PYSPY_DIR")
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if not out_dir or spy is None:
        return None
    out = Path(out_dir) / f"felix-{tag}.txt"
    args = [spy, "record", "-p", str(felix.proc.pid), "-o", str(out), "--format", "raw"]
    args += [
        "-d",
        str(round(seconds)),
        "-r",
        os.environ.get("BENCH_PYSPY_RATE", "250"),
        "--threads",
        "--nonblocking",
    ]
    args += os.environ.get("BENCH_PYSPY_ARGS", "").split()  # e.g. --gil: the GIL holder only
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def try_connect_from(ns: str, dst: str) -> bool:
    return bool(connect_times(ns, dst, 1))


MARKERS = {
    "first_log": "",
    "config_loaded": "Felix configuration loaded",
    "calc_in_sync": "sending InSync",
    "ifaces_in_sync": "Interface monitor in sync",
    "in_sync": "Dataplane in sync (first apply took",
}


def rule_handles(host: str) -> set[tuple[str, int]]:
    """(chain, handle) of every rule: a rewritten rule gets a new handle."""
    return {(o["rule"]["chain"], o["rule"]["handle"]) for o in fh.nft_table(host) if "rule" in o}


def timeline(log_path: Path, t_start: float) -> dict[str, float]:
    """Seconds from ``t_start`` (wall clock) to the first Felix log line with each marker (the
    harness truncates the log at each start)."""
    out: dict[str, float] = {}
    for line in log_path.read_text().splitlines():
        try:
            stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S.%f").timestamp()
        except ValueError:
            continue
        for name, text in MARKERS.items():
            if name not in out and text in line:
                out[name] = round(stamp - t_start, 3)
        if "first apply took" in line and "first_apply" not in out:
            out["first_apply"] = float(line.rsplit("took ", 1)[1].rstrip("s)"))
    if "in_sync" not in out:
        raise AssertionError("no 'Dataplane in sync' line in the Felix log")
    return out


def nft_ruleset_commands(host: str) -> list[dict[str, Any]]:
    """The programmed table as ``add`` commands: table, chains, sets/maps, then rules."""
    objs = fh.nft_table(host)
    order = {"table": 0, "chain": 1, "set": 2, "map": 2, "rule": 3}
    cmds = []
    for obj in sorted(objs, key=lambda o: order.get(next(iter(o)), 4)):
        kind, body = next(iter(obj.items()))
        if kind not in order:
            continue
        body = {k: v for k, v in body.items() if k != "handle"}
        cmds.append({"add": {kind: body}})
    return cmds


NFT_LOAD = """
import json, sys, time, nftables
cmds = json.load(open(sys.argv[1]))
nft = nftables.Nftables(); nft.set_json_output(True)
start = time.perf_counter()
rc, _, err = nft.json_cmd({"nftables": cmds})
took = time.perf_counter() - start
assert rc == 0, err
print(took)
"""


def nft_load_time(cmds: list[dict[str, Any]]) -> float:
    """Best of 3 one-transaction loads of ``cmds`` into a fresh netns."""
    best = float("inf")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cmds, f)
    try:
        for _ in range(3):
            with fh.netns("fxbn") as ns:
                out = fh.in_ns(ns, sys.executable, "-c", NFT_LOAD, f.name, timeout=60).stdout
                best = min(best, float(out.strip()))
    finally:
        os.unlink(f.name)
    return best


# --- 3: throughput ------------------------------------------------------------------------------


def iperf(client: Any, server_ip: str, seconds: int = 2) -> float:
    out = fh.in_ns(
        client.ns, "iperf3", "-c", server_ip, "-t", str(seconds), "-O", "1", "-J", timeout=60
    ).stdout
    return float(json.loads(out)["end"]["sum_received"]["bits_per_second"])


def tput_policies(n: int) -> list[dict[str, Any]]:
    """``n`` policies all applying to the server; only the last allows iperf3's port."""
    docs = []
    for i in range(n):
        port, src = (5201, "role == 'client'") if i == n - 1 else (10000 + i, f"role == 'x{i}'")
        docs.append(
            felix_shapes.ingress_policy(f"tp-{i:04d}", NAMESPACE, "app == 'server'", src, port)
        )
    return docs


def bench_throughput() -> None:
    """Alternates runs with the 1,000 policies applying to the server (label ``app=server``)
    and not applying (relabelled: Felix drops their chains), so both see the same noise;
    medians of ``TPUT_PAIRS`` runs each."""
    with (
        host_env("tput") as (host, ds, felix, _),
        fh.workload(host, ds, "server", "10.65.0.2", namespace=NAMESPACE,
                    labels={"app": "server"}) as server,
        fh.workload(host, ds, "client", "10.65.0.3", namespace=NAMESPACE,
                    labels={"role": "client"}) as client,
    ):  # fmt: skip
        felix.start()
        felix.wait_ready()
        srv = subprocess.Popen(
            ["ip", "netns", "exec", server.ns, "iperf3", "-s"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        chain = f"filter-cali-tw-{server.iface}"

        def jumps() -> int:
            """Policy jumps reachable from the server's ingress chain: direct, or through the
            policy-group chains it jumps to (calico.felix.rules.groups; these 1,000 policies
            share one selector, so they sit in group chains)."""

            def listed(name: str) -> str | None:  # None: gone meanwhile (groups regrouping)
                res = fh.in_ns(host, "nft", "list", "chain", "inet", "calico", name, check=False)
                return res.stdout if res.returncode == 0 else None

            out = listed(chain) or ""
            found = out.count("jump filter-cali-pi-")
            for group in dict.fromkeys(re.findall(r"jump (filter-cali-gi-\S+)", out)):
                text = listed(group)
                if text is None:
                    return -1  # raced a regroup: eventually() asks again
                found += text.count("jump filter-cali-pi-")
            return found

        def policed(on: bool) -> None:
            server.labels["app"] = "server" if on else "unpoliced"
            ds.apply(fh.wep_doc(server))
            fh.eventually(jumps, N_TPUT_POLICIES if on else 0, timeout=120, pause=0.2)
            fh.eventually(lambda: try_connect_port(client.ns, server.ip, 5201), True, timeout=30)

        try:
            fh.eventually(lambda: try_connect_port(client.ns, server.ip, 5201), True, timeout=30)
            server.labels["app"] = "unpoliced"
            ds.apply(fh.wep_doc(server))
            t0 = time.perf_counter()
            for doc in tput_policies(N_TPUT_POLICIES):
                ds.apply(doc)
            time.sleep(0.5)
            policed(True)
            program_s = time.perf_counter() - t0
            none: list[float] = []
            with_pol: list[float] = []
            for i in range(TPUT_PAIRS):  # ABBA order: no position advantage for either
                for on in (False, True) if i % 2 == 0 else (True, False):
                    policed(on)
                    (with_pol if on else none).append(iperf(client, server.ip))
        finally:
            srv.kill()
            srv.wait(10)
        emit(
            BENCH,
            "tput_1000_policies_bps",
            statistics.median(with_pol),
            statistics.median(none),
            target_ratio=0.95,
            runs_none=[round(x) for x in none],
            runs_with=[round(x) for x in with_pol],
            program_1000_policies_s=round(program_s, 3),
        )


def try_connect_port(ns: str, dst: str, port: int) -> bool:
    result: list[bool] = []

    def body() -> None:
        enter_netns(ns)
        result.append(try_connect(dst, port, 1.0))

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(10)
    return bool(result and result[0])


def compile_bytecode() -> None:
    """Write ``calico``'s .pyc files, as an installed package has them: with
    PYTHONDONTWRITEBYTECODE set (as on the dev machines) every Felix start would otherwise
    compile its whole import graph from source (~10% of a cold start, py-spy)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "calico")], check=True)


def main() -> int:
    global PROBE_EVERY
    if os.geteuid() != 0:
        print("bench_felix needs root (network namespaces, nftables)", file=sys.stderr)
        return 1
    if "--probe-every" in sys.argv[1:]:  # the probers' period, ms
        PROBE_EVERY = float(sys.argv[sys.argv.index("--probe-every") + 1]) / 1000
    compile_bytecode()
    # Felix runs as an installed package does: it may write its caches (calico.codecache).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if "--cold-compare" in sys.argv[1:]:
        args = sys.argv[1:]
        rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 7
        bench_cold_compare(Path(args[args.index("--cold-compare") + 1]).resolve(), rounds)
        return 0
    if "--cold-only" in sys.argv[1:]:
        bench_cold_only()
        return 0
    if "--tput-only" in sys.argv[1:]:
        bench_throughput()
        return 0
    large = "--large" in sys.argv[1:]  # 1,000 policies + 10,000 remote endpoints standing
    bpf = "--bpf" in sys.argv[1:]  # BPFEnabled=true
    ttfr_only = large or bpf or "--ttfr-only" in sys.argv[1:]  # the TTFR measurement alone
    stages = None
    if "--stages" in sys.argv[1:]:  # per-stage medians of the TTFR path (stamped in Felix)
        stages = Path(tempfile.mkdtemp(prefix="bench-felix-stages-"))
        stamp_dir = str(Path(__file__).resolve().parent / "ttfr_stages")
        paths = [stamp_dir, *filter(None, [os.environ.get("PYTHONPATH")])]
        os.environ["PYTHONPATH"] = os.pathsep.join(paths)
        os.environ["TTFR_STAGES_DIR"] = str(stages)
    try:
        bench_ttfr_and_cold_apply(cold=not ttfr_only, stages=stages, large=large, bpf=bpf)
    finally:
        if stages is not None:
            shutil.rmtree(stages, ignore_errors=True)
    if ttfr_only:
        return 0
    if shutil.which("iperf3"):
        bench_throughput()
    else:
        print("bench_felix: iperf3 not installed, throughput skipped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
