"""Typha fan-out: 100,000 keys, 1,000 concurrent clients on loopback.

Measures (one JSON line each, see harness.emit):
- time from the 1,000 clients connecting until every one has its snapshot and IN_SYNC
  (target <= 30 s); baseline: one client alone, same run, same Typha;
- p50 / p99 over a series of datastore writes of the time from the write until all 1,000
  clients have the update (target p99 <= 200 ms); baseline: the same with one client;
- Typha's peak RSS (target <= 1.5 GB) and CPU seconds; baseline: after the initial sync with
  no clients.

Typha is the real ``calico component typha`` over the embedded (SQLite) datastore holding
100,000 WorkloadEndpoints (one v1 key each). Clients are lightweight protocol clients, 250
asyncio connections per process: each speaks the real handshake (snappy compression, ACKs,
pongs) and decodes every control and delta message; in each process the first client fully
unpacks its snapshot and checks the key count, the others check they received the same number
of snapshot bytes (the server shares one pre-encoded snapshot) — what a real client spends
decoding is not Typha's cost. Run once: ``python benchmarks/bench_typha.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import emit

N_KEYS = int(os.environ.get("BENCH_TYPHA_KEYS", "100000"))  # smaller for a smoke run
N_CLIENTS = int(os.environ.get("BENCH_TYPHA_CLIENTS", "1000"))
PER_PROCESS = 250
N_WRITES = 40
WRITE_GAP = 0.25
MARKER = "bench-marker"


# -- lightweight client processes --------------------------------------------------------------


async def _client(
    host: str, port: int, idx: int, n_writes: int, report: dict, decode_snapshot: bool
) -> None:
    import msgpack

    from calico.syncer.typhaclient import framing
    from calico.syncer.typhaclient import messages as m

    prefix = m._KVS_PREFIX
    for attempt in range(50):
        try:
            r, w = await asyncio.open_connection(host, port, limit=1 << 22)
            break
        except OSError:
            await asyncio.sleep(0.1 * (attempt + 1))
    else:
        raise SystemExit("cannot connect")
    w.write(
        framing.frame_message(
            m.ClientHello(
                hostname=f"bench-{idx}",
                syncer_type="felix",
                supports_decoder_restart=True,
                supported_compression_algorithms=("snappy",),
                supports_modern_policy_keys=True,
                client_conn_id=idx,
            )
        )
    )
    compressed = False
    snapshot_bytes = 0
    kvs = 0
    synced: float | None = None
    arrivals: dict[int, float] = {}
    while len(arrivals) < n_writes:
        header = await r.readexactly(4)
        payload = await r.readexactly(int.from_bytes(header, "big"))
        if synced is None and len(payload) > 4096:  # a snapshot chunk (control frames are tiny)
            snapshot_bytes += len(payload)
            if decode_snapshot:
                body = framing.decompress(payload) if compressed else payload
                kvs += len(msgpack.unpackb(body)[1]["kvs"])
            continue
        body = framing.decompress(payload) if compressed else payload
        if body.startswith(prefix):
            if synced is None:
                snapshot_bytes += len(payload)
                if decode_snapshot:
                    kvs += len(msgpack.unpackb(body)[1]["kvs"])
                continue
            if MARKER.encode() in body:
                now = time.time()
                for kv in msgpack.unpackb(body)[1]["kvs"]:
                    if kv[0].endswith(f"/{MARKER}/labels") and kv[1] is not None:
                        seq = int(kv[1]["seq"])  # ProfileLabels: the bare map
                        arrivals.setdefault(seq, now)
            continue
        msg = m.decode(body)
        if isinstance(msg, m.DecoderRestart):
            compressed = bool(msg.compression_algorithm)
            w.write(framing.frame_message(m.Ack()))
        elif isinstance(msg, m.Ping):
            w.write(framing.frame_message(m.Pong(msg.timestamp, time.time())))
        elif isinstance(msg, m.SyncStatusMsg) and msg.status.value == "in-sync" and synced is None:
            synced = time.time()
            report["synced"].append((idx, synced, snapshot_bytes, kvs))
            report["event"].set()
    report["arrivals"][idx] = arrivals
    w.close()


async def _client_process(host: str, port: int, base: int, n: int, n_writes: int) -> None:
    report: dict = {"synced": [], "arrivals": {}, "event": asyncio.Event()}
    tasks = [
        asyncio.create_task(_client(host, port, base + i, n_writes, report, i == 0))
        for i in range(n)
    ]

    async def announce() -> None:
        while len(report["synced"]) < n:
            await report["event"].wait()
            report["event"].clear()
        sizes = {b for (_, _, b, _) in report["synced"]}
        first = next(k for (i, _, _, k) in report["synced"] if i == base)
        print(
            json.dumps(
                {
                    "synced": max(t for (_, t, _, _) in report["synced"]),
                    "snapshot_sizes": sorted(sizes),
                    "first_kvs": first,
                }
            ),
            flush=True,
        )

    await asyncio.gather(announce(), *tasks)
    arrivals = report["arrivals"]
    # per write: the time the last of this process's clients got it
    last = {seq: max(arrivals[c][seq] for c in arrivals) for seq in next(iter(arrivals.values()))}
    print(json.dumps({"arrivals": last}), flush=True)


def client_main(argv: list[str]) -> None:
    host, port, base, n, n_writes = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), int(argv[4])
    asyncio.run(_client_process(host, port, base, n, n_writes))


# -- orchestration -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wep_json(i: int) -> tuple[str, str]:
    from calico.model import ResourceKey

    name = f"node{i % 500}-k8s-pod{i}-eth0"
    doc = {
        "apiVersion": "projectcalico.org/v3",
        "kind": "WorkloadEndpoint",
        "metadata": {"name": name, "namespace": "bench", "labels": {"app": f"a{i % 50}"}},
        "spec": {
            "orchestrator": "k8s",
            "workload": f"pod{i}",
            "pod": f"pod{i}",
            "node": f"node{i % 500}",
            "endpoint": "eth0",
            "interfaceName": f"cali{i:011d}",
            "ipNetworks": [f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}/32"],
            "profiles": ["kns.bench"],
        },
    }
    return ResourceKey("WorkloadEndpoint", name, "bench").default_path(), json.dumps(doc)


def proc_stats(pid: int) -> tuple[float, float, float]:
    """(RSS MB, peak RSS MB, CPU seconds) of a process."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
    hwm = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM"))
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return rss / 1024, hwm / 1024, cpu


class Marker:
    """Datastore writes the clients watch for: a Profile whose labels carry a sequence number."""

    def __init__(self, path: str) -> None:
        from calico.datastore.client import Client
        from calico.datastore.local import LocalBackend

        self.backend = LocalBackend(path)
        self.client = Client(self.backend)
        self.seq = 0

    def write(self) -> tuple[int, float]:
        from calico.api.io import parse_resource

        doc = {
            "apiVersion": "projectcalico.org/v3",
            "kind": "Profile",
            "metadata": {"name": MARKER},
            "spec": {"labelsToApply": {"seq": str(self.seq)}},
        }
        res = parse_resource(doc)
        t = time.time()
        self.client.apply(res)
        self.seq += 1
        return self.seq - 1, t


def run_clients(
    port: int, n_clients: int, per_process: int, marker: Marker, n_writes: int
) -> tuple[float, list[float], list[dict]]:
    """Start the clients; return (time to all in sync, per-write fan-out latencies, reports)."""
    n_procs = max(1, (n_clients + per_process - 1) // per_process)
    start = time.time()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "client",
                "127.0.0.1",
                str(port),
                str(p * per_process),
                str(min(per_process, n_clients - p * per_process)),
                str(n_writes),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for p in range(n_procs)
    ]
    reports = [json.loads(p.stdout.readline()) for p in procs]  # type: ignore[union-attr]
    in_sync = max(r["synced"] for r in reports) - start
    time.sleep(1.0)
    writes: dict[int, float] = {}
    for _ in range(n_writes):
        seq, t = marker.write()
        writes[seq] = t
        time.sleep(WRITE_GAP)
    finals = [json.loads(p.stdout.readline()) for p in procs]  # type: ignore[union-attr]
    for p in procs:
        p.wait(60)
    latencies = [
        max(f["arrivals"][str(seq)] for f in finals) - t for seq, t in sorted(writes.items())
    ]
    return in_sync, latencies, reports


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def main() -> None:
    from calico.datastore.client import Client
    from calico.datastore.local import LocalBackend

    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "calico.db")
        backend = LocalBackend(db)
        Client(backend).ensure_initialized("bench")
        backend.apply_many(wep_json(i) for i in range(N_KEYS))
        backend.close()
        marker = Marker(db)
        marker.write()  # the marker key exists before the clients connect
        port, health = free_port(), free_port()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("TYPHA_")},
            "DATASTORE_TYPE": "local",
            "CALICO_DATASTORE_PATH": db,
            "TYPHA_SERVERHOST": "127.0.0.1",
            "TYPHA_SERVERPORT": str(port),
            "TYPHA_HEALTHENABLED": "true",
            "TYPHA_HEALTHPORT": str(health),
            "TYPHA_LOGSEVERITYSCREEN": "warning",
            "TYPHA_SHUTDOWNTIMEOUTSECS": "1",
        }
        calico = str(Path(sys.executable).parent / "calico")
        started = time.monotonic()
        typha = subprocess.Popen(
            [calico, "component", "typha", "-c", str(Path(tmp) / "typha.cfg")], env=env
        )
        try:
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{health}/readiness", timeout=2):
                        break
                except OSError:
                    if typha.poll() is not None or time.monotonic() - started > 300:
                        raise SystemExit("Typha did not become ready") from None
                    time.sleep(0.5)
            typha_sync = time.monotonic() - started
            _base_rss, base_hwm, base_cpu = proc_stats(typha.pid)

            one_sync, one_lat, one_reports = run_clients(port, 1, 1, marker, 20)
            assert one_reports[0]["first_kvs"] >= N_KEYS, one_reports
            _, _, cpu0 = proc_stats(typha.pid)
            in_sync, lat, reports = run_clients(port, N_CLIENTS, PER_PROCESS, marker, N_WRITES)
            rss, hwm, cpu1 = proc_stats(typha.pid)
            sizes = {s for r in reports for s in r["snapshot_sizes"]}
            assert len(sizes) == 1, sizes  # every client got the same snapshot bytes
            assert all(r["first_kvs"] >= N_KEYS for r in reports), reports
        finally:
            typha.send_signal(signal.SIGTERM)
            try:
                typha.wait(30)
            except subprocess.TimeoutExpired:
                typha.kill()
    common = {"keys": N_KEYS, "clients": N_CLIENTS, "typha_initial_sync_s": round(typha_sync, 2)}
    emit("typha", "all_clients_in_sync_s", in_sync, one_sync, target_s=30.0,
         meets_target=in_sync <= 30.0, snapshot_compressed_bytes=sizes.pop(), **common)  # fmt: skip
    p50, p99 = pct(lat, 0.5), pct(lat, 0.99)
    emit("typha", "fanout_p50_s", p50, pct(one_lat, 0.5), writes=N_WRITES, **common)
    emit("typha", "fanout_p99_s", p99, pct(one_lat, 0.99), target_s=0.2,
         meets_target=p99 <= 0.2, writes=N_WRITES, **common)  # fmt: skip
    emit("typha", "typha_peak_rss_mb", hwm, base_hwm, target_mb=1536,
         meets_target=hwm <= 1536, rss_after_mb=round(rss, 1), **common)  # fmt: skip
    emit("typha", "typha_cpu_s_1000_clients", cpu1 - cpu0, cpu0 - base_cpu,
         baseline_is="CPU for the one-client run", **common)  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "client":
        client_main(sys.argv[2:])
    else:
        main()
