"""Whole-Felix scale benchmark (issue 23): in-sync time, RSS and churn apply latency at scale.

Run as ``python benchmarks/bench_felix_scale.py [--remote N]`` (root; default N = 250,000).
One real Felix (``calico component felix``: calc graph, nftables dataplane, route table) runs in
a uniquely named "host" netns on a local datastore holding the shape of upstream's largest
calc-graph benchmark, the same shape as ``bench_calc_graph.py --scale``: 200 local endpoints
(real ``cali*`` veths, peers in one workload netns), N remote endpoints on 1,250 other hosts,
10,000 GlobalNetworkPolicies in 5 tiers over 5,000 selectors, 200 network sets, 20 namespace
profiles. The datastore is filled before Felix starts, one transaction per 1,000 keys, in the
stored form ``Client.apply`` writes (a sample of every kind is checked equal to it).

Metrics (each against a baseline measured in the same run):

* ``felix_scale_in_sync_s``: Felix process start -> "Dataplane in sync" in its log. Target
  <= 20 s. Baseline: the calc graph alone at the same shape (``bench_calc_graph.py --child
  scale``, its own process). Extra: the log timeline (config loaded, calc in sync, first apply).
  ``cpu_s``: Felix's CPU time at that point (user + system), which load disturbs far less;
  ``calc_only_cpu_s`` the baseline's; ``first_transaction``: Felix's log line for the first
  apply's nftables transaction (commands, seconds, netlink or libnftables and why).
* ``felix_scale_rss_mb``: Felix's peak RSS (VmHWM) after in-sync. Target <= 1.5 GB. Baseline:
  the calc graph's peak RSS. ``rss_timeline``: (seconds since start, VmRSS MB) every 2 s up to
  in-sync, to place the peak in the log's timeline.
* ``felix_scale_churn_p99_s``: 100 remote-endpoint changes per second, open loop, each a new
  IP for an endpoint that is a member of an IP set the local policies use. Latency = the write
  starting -> the new IP in a committed NEWSETELEM message on nftables' netlink multicast
  group in the host netns (the kernel committed it). Baseline: the calc graph's own p99 per
  change. This includes the dataplane's apply throttle (upstream's: 10 tokens, one per
  100 ms), so at 100 changes/s a change waits up to 100 ms for its apply by design.
  Also reported: Felix's RSS now just before and after the churn (``rss_*_churn_now_mb``);
  ``--churn N`` makes the churn N changes long (default 1,000), to see whether RSS grows.
* ``felix_scale_apply_p99_s``: p99 duration of the applies during the churn (upstream's
  ``msecToApply`` log line). Target (issue 23's "p99 apply") <= 50 ms. Same baseline.

``--mem-dir DIR`` (with ``--no-baseline`` to iterate) loads ``benchmarks/felix_memory`` into
Felix: tracemalloc from the start (``MEMPROF_FRAMES``, 0 for none), then at in-sync its
``report.txt`` (top allocation sites, live objects by type) and ``smaps.txt``; no churn.

``--gc-stats FILE`` loads ``benchmarks/felix_gcstats`` into Felix: the number and duration of
its cyclic-GC collections per generation, reported in the in-sync line (``gc``).

``BENCH_PYSPY_DIR=<dir>`` records py-spy raw profiles of the start (``felix-scale-start.txt``)
and the churn (``felix-scale-churn.txt``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import bench_calc_graph as shape  # noqa: E402  (the dataset shape and the calc-only child)
import bench_felix as bf  # noqa: E402  (netns, Felix harness, timeline, py-spy helper)
from harness import emit  # noqa: E402

from calico.api import parse_resource, resource_to_wire  # noqa: E402
from calico.datastore.client import resource_path  # noqa: E402

fh = bf.fh
BENCH = "felix_scale"
LOCAL_EPS = 200
REMOTE_HOSTS = 1250
CHURN_RATE = 100.0  # changes per second
CHURN_N = 1000
CHURN_MAX = 250 * 256  # distinct churn addresses (10.250.x.y, y in 1..250)
STAMP = "2026-01-01T00:00:00Z"
SAMPLE_EVERY = 5000  # every n-th generated document is also validated through the models


def selector(j: int) -> str:
    return f"app == 'app{j % 50}' && role == 'r{(j // 50) % 10}' && team == 't{j // 500}'"


def labels(i: int, namespace: str) -> dict[str, str]:
    return {
        "app": f"app{i % 50}",
        "role": f"r{(i // 7) % 10}",
        "team": f"t{i % 10}",
        "projectcalico.org/namespace": namespace,
        "projectcalico.org/orchestrator": "k8s",
    }


def wep_ip(i: int) -> str:
    return f"10.{i // 65536}.{(i // 256) % 256}.{i % 256}"


def wep_doc(i: int, ip: str | None = None) -> dict[str, Any]:
    """Endpoint ``i``: 0..199 are this host's (on a real veth), the rest spread 200 a host."""
    ns = f"ns{i % shape.NAMESPACES}"
    local = i < LOCAL_EPS
    node = fh.HOSTNAME if local else f"host{i // LOCAL_EPS}"  # no dashes: names double them
    pod = f"pod{i}"
    spec = {
        "endpoint": "eth0",
        "interfaceName": fh.iface_name(ns, pod) if local else f"cali{i:011d}",
        "ipNetworks": [f"{ip or wep_ip(i)}/32"],
        "node": node,
        "orchestrator": "k8s",
        "pod": pod,
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "profiles": [f"kns.{ns}"],
        "workload": pod,
    }
    name = f"{node}-k8s-{pod}-eth0"
    meta = {"name": name, "namespace": ns, "labels": labels(i, ns)}
    return {"kind": "WorkloadEndpoint", "metadata": meta, "spec": spec}


def policy_doc(k: int) -> dict[str, Any]:
    tier = f"tier{k % shape.TIERS}"
    spec = {
        "tier": tier,
        "order": float(k),
        "selector": selector(k % 5000),
        "types": ["Ingress", "Egress"],
        "ingress": [
            {
                "action": "Allow",
                "protocol": "TCP",
                "source": {"selector": selector((k * 7) % 5000)},
                "destination": {"ports": [80, "http"]},
            }
        ],
        "egress": [
            {"action": "Allow", "destination": {"selector": f"netset == 'n{k % shape.NETSETS}'"}}
        ],
    }
    return {"kind": "GlobalNetworkPolicy", "metadata": {"name": f"{tier}.pol{k}"}, "spec": spec}


def documents(remote: int) -> Iterator[dict[str, Any]]:
    for t in range(shape.TIERS):
        spec = {"order": float(t * 100), "defaultAction": "Deny"}
        yield {"kind": "Tier", "metadata": {"name": f"tier{t}"}, "spec": spec}
    for n in range(shape.NAMESPACES):
        yield {
            "kind": "Profile",
            "metadata": {"name": f"kns.ns{n}"},
            "spec": {
                "ingress": [{"action": "Allow"}],
                "egress": [{"action": "Allow"}],
                "labelsToApply": {"pcns.team": f"team{n % 4}"},
            },
        }
    for j in range(shape.NETSETS):
        meta = {"name": f"gns{j}", "labels": {"netset": f"n{j}"}}
        yield {"kind": "GlobalNetworkSet", "metadata": meta, "spec": {"nets": [f"10.200.{j}.0/24"]}}
    for k in range(shape.SCALE["POLICIES"]):
        yield policy_doc(k)
    for i in range(LOCAL_EPS + remote):
        yield wep_doc(i)


def stored(doc: dict[str, Any], validate: bool) -> tuple[str, str]:
    """(key, JSON) as ``Client.apply`` stores ``doc``: validated through the models when
    ``validate`` (and then checked equal to the fast path), else built directly."""
    doc = {"apiVersion": "projectcalico.org/v3", **doc}
    meta = {**doc["metadata"], "creationTimestamp": STAMP, "uid": str(uuid.uuid4())}
    fast = {**doc, "metadata": meta}
    if validate:
        res = parse_resource(fast)
        wire = resource_to_wire(res)
        wire["metadata"].pop("resourceVersion", None)
        canon = json.loads(json.dumps(fast))
        if wire != canon:
            raise AssertionError(f"generated {doc['kind']} differs:\n{wire}\n{canon}")
    path = resource_path(doc["kind"], meta["name"], meta.get("namespace"))
    return path, json.dumps(fast, separators=(",", ":"), sort_keys=True)


def stored_remote_weps(n: int) -> Iterator[tuple[dict[str, Any], str, str]]:
    """(document, key, JSON) for the first ``n`` remote endpoints, stored unvalidated: the
    listing the per-endpoint syncer benches (``bench_wep_processor``, ``bench_wep_resync``)
    feed to the WorkloadEndpoint path."""
    for i in range(LOCAL_EPS, LOCAL_EPS + n):
        doc = wep_doc(i)
        path, raw = stored(doc, validate=False)
        yield doc, path, raw


def fill(ds: Any, remote: int) -> int:
    batch: list[tuple[str, str]] = []
    n = 0
    for n, doc in enumerate(documents(remote), 1):
        sample = n % (SAMPLE_EVERY if doc["kind"] == "WorkloadEndpoint" else 500) == 1
        batch.append(stored(doc, validate=sample))
        if len(batch) == 1000:
            ds.backend.apply_many(batch)
            batch = []
    if batch:
        ds.backend.apply_many(batch)
    return n


@contextlib.contextmanager
def local_veths(host: str) -> Iterator[str]:
    """200 ``cali*`` veths in ``host`` (up, CNI sysctls), peers ``w<i>`` in one netns."""
    with fh.netns("fxsw") as wl:
        ifaces = []
        for i in range(LOCAL_EPS):
            ns = f"ns{i % shape.NAMESPACES}"
            ifaces.append(fh.iface_name(ns, f"pod{i}"))
        bf.ip_batch([f"link add {c} type veth peer w{i} netns {wl}" for i, c in enumerate(ifaces)],
                    ns=host)  # fmt: skip
        bf.ip_batch([f"link set {c} up" for c in ifaces], ns=host)
        sysctls = []
        for c in ifaces:
            sysctls += [f"net.ipv4.conf.{c}.proxy_arp=1", f"net.ipv4.conf.{c}.forwarding=1"]
        fh.in_ns(host, "sysctl", "-q", "-w", *sysctls)
        yield wl


def active_members(remote: int) -> list[int]:
    """Remote endpoints in an IP set a local endpoint's policies use (source selectors of the
    policies whose selector matches a local endpoint)."""
    local = {(i % 50, (i // 7) % 10, i % 10) for i in range(LOCAL_EPS)}
    active: set[tuple[int, int, int]] = set()
    for k in range(shape.SCALE["POLICIES"]):
        j = k % 5000
        if (j % 50, (j // 50) % 10, j // 500) in local:
            s = (k * 7) % 5000
            active.add((s % 50, (s // 50) % 10, s // 500))
    return [
        i for i in range(LOCAL_EPS, LOCAL_EPS + remote) if (i % 50, (i // 7) % 10, i % 10) in active
    ]


NETLINK_NETFILTER = 12
NFNLGRP_NFTABLES = 7
SOL_NETLINK = 270
NETLINK_ADD_MEMBERSHIP = 1
NEWSETELEM = (10 << 8) | 12  # NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWSETELEM
CHURN_PREFIX = bytes([10, 250])  # every churn IP is 10.250.x.y


class Monitor(threading.Thread):
    """Listens, inside ``host``, to nftables' netlink multicast group and records when each
    10.250.x.y address first appears in a committed NEWSETELEM message. (``nft monitor``
    reads the whole ruleset before it prints anything: minutes at 250,000 elements.) An
    interval set's element also carries its end key (the next address), so every sighting is
    kept and a change counts the first one after its own write."""

    def __init__(self, host: str) -> None:
        super().__init__(daemon=True)
        self.host = host
        self.sightings: dict[str, list[float]] = {}
        self.ready = threading.Event()
        self._halt = threading.Event()

    def run(self) -> None:
        bf.enter_netns(self.host)
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        sock.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE (root)
        sock.bind((0, 0))
        sock.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, NFNLGRP_NFTABLES)
        sock.settimeout(0.2)
        self.ready.set()
        while not self._halt.is_set():
            try:
                data = sock.recv(1 << 20)
            except TimeoutError:
                continue
            now = time.perf_counter()
            offset = 0
            while offset + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, offset)
                if length < 16:
                    break
                if kind == NEWSETELEM:
                    self._scan(data[offset + 16 : offset + length], now)
                offset += (length + 3) & ~3
        sock.close()

    def _scan(self, body: bytes, now: float) -> None:
        at = body.find(CHURN_PREFIX)
        while at != -1 and at + 4 <= len(body):
            ip = socket.inet_ntoa(body[at : at + 4])
            self.sightings.setdefault(ip, []).append(now)
            at = body.find(CHURN_PREFIX, at + 1)

    def first_after(self, ip: str, t0: float) -> float | None:
        return next((t for t in self.sightings.get(ip, ()) if t >= t0), None)

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


def apply_times(log_text: str) -> list[float]:
    """Seconds of each apply in a piece of Felix's log (upstream's per-apply line)."""
    marker = "Finished applying updates to dataplane. msecToApply="
    return [
        float(line.rpartition(marker)[2]) / 1000 for line in log_text.splitlines() if marker in line
    ]


def churn(
    ds: Any, host: str, remote: int, felix: Any, n: int = CHURN_N
) -> tuple[list[float], int, list[float]]:
    members = active_members(remote)
    if not members:
        raise AssertionError("no remote endpoint is in an active IP set")
    mon = Monitor(host)
    mon.start()
    mon.ready.wait(30)
    spy = bf.profile_felix(felix, "scale-churn", n / CHURN_RATE + 2)
    starts: dict[str, float] = {}
    log_offset = len(felix.log_path.read_text(errors="replace"))
    t_base = time.perf_counter()
    for r in range(n):
        i = members[(r * 7919) % len(members)]
        ip = f"10.250.{r // 250}.{1 + r % 250}"
        delay = t_base + r / CHURN_RATE - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        key, value = stored(wep_doc(i, ip), validate=False)
        t0 = time.perf_counter()
        ds.backend.apply(key, value)
        starts[ip] = t0

    def pending() -> int:
        return sum(1 for ip, t0 in starts.items() if mon.first_after(ip, t0) is None)

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and pending():
        time.sleep(0.1)
    mon.stop()
    applies = apply_times(felix.log_path.read_text(errors="replace")[log_offset:])
    if spy is not None:
        spy.wait(60)
    seen = {ip: mon.first_after(ip, t0) for ip, t0 in starts.items()}
    lat = [t - starts[ip] for ip, t in seen.items() if t is not None]
    if len(lat) < len(starts):
        print(f"addresses sighted: {len(mon.sightings)}", file=sys.stderr)
        print("Felix log tail:\n" + "\n".join(felix.log().splitlines()[-20:]), file=sys.stderr)
    return lat, len(starts) - len(lat), applies


def calc_only(hosts: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, shape.__file__, "--child", "scale", str(hosts)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return json.loads(out.strip().splitlines()[-1])


def wait_in_sync(felix: Any, timeout: float) -> None:
    """Until Felix logs "Dataplane in sync": reading its log costs the loaded machine far less
    than the harness's readiness probe (a Python process in the netns per try)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if felix.proc.poll() is not None:
            raise AssertionError(f"Felix exited rc={felix.proc.returncode}:\n{felix.log()}")
        if bf.MARKERS["in_sync"] in felix.log_path.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise AssertionError(f"Felix not in sync after {timeout}s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (load moves wall-clock times by 2x here)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_gc_stats(path: Path) -> Any:
    """Felix's GC totals from the hook's next rewrite (once a second): up to in-sync plus at
    most a second."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_mtime_ns != before:
            return json.loads(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"no GC stats in {path}")


def vm_hwm_mb(pid: int) -> float:
    """Felix's peak RSS so far (MB)."""
    return _status_mb(pid, "VmHWM:")


def vm_rss_mb(pid: int) -> float:
    """Felix's RSS now (MB)."""
    return _status_mb(pid, "VmRSS:")


def _status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} for {pid}")


class RssSampler(threading.Thread):
    """Felix's VmRSS every ``every`` seconds from its start: when the peak happens (which
    phase) says more about what to cut than the peak alone."""

    def __init__(self, pid: int, every: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.pid, self.every, self.t0 = pid, every, time.monotonic()
        self.samples: list[tuple[float, int]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.every):
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        mb = int(line.split()[1]) // 1024
                        self.samples.append((round(time.monotonic() - self.t0, 1), mb))

    def stop(self) -> list[tuple[float, int]]:
        self._halt.set()
        self.join(5)
        return self.samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remote", type=int, default=REMOTE_HOSTS * LOCAL_EPS)
    parser.add_argument("--mem-dir", type=Path, help="tracemalloc report at in-sync (no churn)")
    parser.add_argument("--gc-stats", type=Path, help="time Felix's GC collections (a file)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the calc-only child")
    parser.add_argument(
        "--churn",
        type=int,
        default=CHURN_N,
        help=f"changes in the churn (default {CHURN_N}; at most {CHURN_MAX}): a long one shows "
        "whether RSS grows",
    )
    args = parser.parse_args()
    if not 0 < args.churn <= CHURN_MAX:
        parser.error(f"--churn must be 1..{CHURN_MAX}")
    if os.geteuid() != 0:
        print("bench_felix_scale needs root (network namespaces, nftables)", file=sys.stderr)
        return 1
    remote = args.remote - args.remote % LOCAL_EPS
    hosts = 1 + remote // LOCAL_EPS
    bf.compile_bytecode()
    if args.mem_dir is not None:  # benchmarks/felix_memory/sitecustomize.py, in Felix only
        args.mem_dir.mkdir(parents=True, exist_ok=True)
        hook = str(BENCH_DIR / "felix_memory")
        paths = [hook, *filter(None, [os.environ.get("PYTHONPATH")])]
        os.environ["PYTHONPATH"] = os.pathsep.join(paths)
        os.environ["MEMPROF_DIR"] = str(args.mem_dir.resolve())
    if args.gc_stats is not None:  # benchmarks/felix_gcstats/sitecustomize.py, in Felix only
        paths = [str(BENCH_DIR / "felix_gcstats"), *filter(None, [os.environ.get("PYTHONPATH")])]
        os.environ["PYTHONPATH"] = os.pathsep.join(paths)
        os.environ["GCSTATS_FILE"] = str(args.gc_stats.resolve())
    no_base = {"in_sync_s": 0.0, "peak_rss_mb": 0.0, "churn_p99_ms": 0.0}
    base = no_base if args.no_baseline else calc_only(hosts)
    with bf.host_env("scale") as (host, ds, felix, _), local_veths(host):
        t0 = time.perf_counter()
        keys = fill(ds, remote)
        fill_s = time.perf_counter() - t0
        t_start = time.time()
        felix.start()
        assert felix.proc is not None
        sampler = RssSampler(felix.proc.pid)
        sampler.start()
        spy = bf.profile_felix(felix, "scale-start", 120)
        wait_in_sync(felix, 900)
        phases = bf.timeline(felix.log_path, t_start)
        first_txn = first_transaction(felix.log_path.read_text(errors="replace"))
        assert felix.proc is not None
        rss = vm_hwm_mb(felix.proc.pid)
        cpu_s = cpu_seconds(felix.proc.pid)
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes what it has on SIGINT
            spy.wait(60)
        gc_stats = None if args.gc_stats is None else read_gc_stats(args.gc_stats)
        shape_info = {"local": LOCAL_EPS, "remote": remote, "policies": shape.SCALE["POLICIES"]}
        emit(BENCH, "felix_scale_in_sync_s", phases["in_sync"], base["in_sync_s"], target=20.0,
             phases=phases, cpu_s=round(cpu_s, 2), calc_only_cpu_s=base.get("cpu_s"),
             keys=keys, fill_s=round(fill_s, 2), gc=gc_stats, first_transaction=first_txn,
             **shape_info,
             baseline_is="calc graph alone, same shape, own process, same run")  # fmt: skip
        emit(BENCH, "felix_scale_rss_mb", rss, base["peak_rss_mb"], target=1536.0,
             rss_timeline=sampler.stop(), baseline_is="calc graph alone: peak RSS")  # fmt: skip
        if args.mem_dir is not None:
            (args.mem_dir / "trigger").touch()
            deadline = time.monotonic() + 600
            while not (args.mem_dir / "done").exists() and time.monotonic() < deadline:
                time.sleep(0.5)
            return 0
        rss_before = vm_rss_mb(felix.proc.pid)
        lat, missed, applies = churn(ds, host, remote, felix, args.churn)
        rss_after = vm_hwm_mb(felix.proc.pid)
        rss_end = vm_rss_mb(felix.proc.pid)
    lat += [float("inf")] * missed
    emit(BENCH, "felix_scale_churn_p99_s", bf.pct(lat, 0.99), base["churn_p99_ms"] / 1000,
         target=0.05, p50_s=round(bf.pct(lat, 0.5), 4), changes=len(lat), missed=missed,
         rate_per_s=CHURN_RATE, rss_after_churn_mb=round(rss_after, 1),
         rss_before_churn_now_mb=round(rss_before, 1), rss_after_churn_now_mb=round(rss_end, 1),
         baseline_is="calc graph alone: p99 per change")  # fmt: skip
    if applies:  # a Felix without the per-apply log line (older builds) reports none
        emit(BENCH, "felix_scale_apply_p99_s", bf.pct(applies, 0.99), base["churn_p99_ms"] / 1000,
             target=0.05, p50_s=round(bf.pct(applies, 0.5), 4), applies=len(applies),
             baseline_is="calc graph alone: p99 per change")  # fmt: skip
    return 0


def first_transaction(log: str) -> str | None:
    """The first apply's nftables transaction as Felix logs it (commands, seconds, the path:
    netlink or libnftables and why); None for a build without the line."""
    marker = "First nftables transaction: "
    for line in log.splitlines():
        if marker in line:
            return line.split(marker, 1)[1]
    return None


if __name__ == "__main__":
    sys.exit(main())
