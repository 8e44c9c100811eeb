"""etcdv3 backend benchmarks against a real etcd this script starts (default raft ticks).

Run as ``python benchmarks/bench_datastore_etcd.py [--keys N] [--threads T]``. Prints JSON lines
via ``harness.emit``; every baseline is raw gRPC on our generated stubs in the same run, so the
ratio is the cost of the Backend layer (CAS transactions, encoding, KVPair objects, paging):

* ``etcd_create``: EtcdBackend.create (Txn on create_revision == 0) per second with T threads,
  N keys (default 100,000; stops early at a time budget and reports the keys actually written)
  vs plain Put requests per second with the same threads.
* ``etcd_serial_create``: ms per create from one thread vs ms per plain Put.
* ``etcd_list``: seconds to list all N keys (paged Range at one revision, KVPairs; median of 7
  rounds, target <= 2x) vs one unpaged Range request over the same keys made back to back in
  each round; ``ratio_min``/``ratio_median``/``ratio_max`` are the per-round ratios.
* ``etcd_watch_latency_p50`` / ``_p99``: seconds from a Put in another process (raw gRPC, each
  value its wall-clock stamp, ``WRITE_GAP`` apart) to the event leaving ``EtcdWatch.next``
  (target p99 <= 2 ms) vs a raw gRPC Watch stream read in this process (baseline): the ratio is
  what the Backend layer (pump thread, queue, conversion) adds. Two rounds of each, alternating;
  ``put_rtt`` is the same quantile of the writer's own Put round trips (counted in every sample).
* ``etcd_watch_added_p50`` / ``_p99``: per event, our EtcdWatch's arrival minus a raw stream's
  (own thread) on the same writes in one process: what our path adds (value) vs the raw
  stream's write-to-event latency on those events (baseline).
  ``--watch-only`` runs just this (``--list-only`` just the list); ``--tmpfs`` puts etcd's data
  dir on /dev/shm (no fsync cost).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(_ROOT))
sys.path.insert(0, str(_ROOT.parent))

from harness import emit, paired_rounds  # noqa: E402

from calico.datastore.etcd import EtcdBackend  # noqa: E402
from calico.datastore.etcd.connection import CHANNEL_OPTIONS  # noqa: E402
from calico.datastore.etcd.keys import prefix_range  # noqa: E402
from calico.datastore.etcd.server import EtcdServer  # noqa: E402
from calico.proto.etcd import rpc_pb2, rpc_pb2_grpc  # noqa: E402

VALUE = '{"kind":"IPPool","spec":{"cidr":"10.0.0.0/16","ipipMode":"Never","natOutgoing":true},"x":"'
VALUE += "a" * (200 - len(VALUE) - 2) + '"}'  # ~200-byte JSON values
RAW_KEYS = 20_000
SERIAL = 1_000
BUDGET_S = 60.0  # cap on the main create phase
N_LATENCY = 400
LIST_ROUNDS = 7
WATCH_ROUNDS = 2  # raw then ours, twice, on the same server
WRITE_GAP = 0.005  # between timestamped writes, so each latency sample is independent


def run_parallel(fn: Callable[[int], object], n: int, threads: int, budget: float) -> int:
    """Call ``fn(0..n-1)`` on ``threads`` threads; stop submitting after ``budget`` s."""
    done = 0
    deadline = time.perf_counter() + budget
    chunk = threads * 200
    with cf.ThreadPoolExecutor(threads) as pool:
        for start in range(0, n, chunk):
            list(pool.map(fn, range(start, min(n, start + chunk))))
            done = min(n, start + chunk)
            if time.perf_counter() > deadline:
                break
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--watch-only", action="store_true")
    parser.add_argument("--list-only", action="store_true")
    parser.add_argument(
        "--tmpfs",
        action="store_true",
        help="etcd's data dir on /dev/shm: its WAL fsyncs cost nothing (etcd 3.4 has no "
        "--unsafe-no-fsync), to see how much of the write-to-watch latency is the disk",
    )
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="bench-etcd-", dir="/dev/shm" if args.tmpfs else None)
    data_dir_on = "tmpfs" if args.tmpfs else "disk"
    try:
        with EtcdServer(base, fast_leases=False) as server:
            if args.watch_only:
                bench_watch_latency(server.endpoints, data_dir_on)
            elif args.list_only:
                bench_list_only(server.endpoints, args.keys)
            else:
                bench_all(server.endpoints, args.keys, args.threads)
                bench_watch_latency(server.endpoints, data_dir_on)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


def bench_all(endpoints: str, keys: int, threads: int) -> None:
    """Creates (parallel, serial) and the list, against raw gRPC on the same server."""
    import grpc

    backend = EtcdBackend(endpoints)
    channel = grpc.insecure_channel(endpoints.split("//")[1], CHANNEL_OPTIONS)
    kv = rpc_pb2_grpc.KVStub(channel)
    value = VALUE.encode()

    def raw_put(i: int, prefix: str = "/raw/") -> None:
        kv.Put(rpc_pb2.PutRequest(key=f"{prefix}{i:07d}".encode(), value=value))

    # Baseline first (warms the server up too).
    t0 = time.perf_counter()
    run_parallel(raw_put, RAW_KEYS, threads, BUDGET_S)
    raw_rate = RAW_KEYS / (time.perf_counter() - t0)

    prefix = "/calico/resources/v3/projectcalico.org/ippools/"
    t0 = time.perf_counter()
    written = run_parallel(
        lambda i: backend.create(f"{prefix}pool-{i:07d}", VALUE),
        keys,
        threads,
        BUDGET_S,
    )
    rate = written / (time.perf_counter() - t0)
    emit(
        "etcd_create",
        "creates_per_s",
        rate,
        raw_rate,
        keys=written,
        requested_keys=keys,
        threads=threads,
        baseline_is="raw gRPC Put/s, same threads",
    )

    t0 = time.perf_counter()
    for i in range(SERIAL):
        backend.create(f"/serial/{i:07d}", VALUE)
    serial_ms = (time.perf_counter() - t0) * 1000 / SERIAL
    t0 = time.perf_counter()
    for i in range(SERIAL):
        raw_put(i, "/serial-raw/")
    raw_ms = (time.perf_counter() - t0) * 1000 / SERIAL
    emit("etcd_serial_create", "ms_per_op", serial_ms, raw_ms, ops=SERIAL)

    bench_list(backend, kv, prefix, written)
    channel.close()
    backend.close()


def bench_list(backend: EtcdBackend, kv: rpc_pb2_grpc.KVStub, prefix: str, written: int) -> None:
    count = len(backend.list(prefix).kvs)
    assert count == written, (count, written)
    start, end = prefix_range(prefix)
    req = rpc_pb2.RangeRequest(key=start, range_end=end)
    result = paired_rounds(lambda: backend.list(prefix), lambda: kv.Range(req), LIST_ROUNDS)
    for key in ("cpu_ratio_min", "cpu_ratio_median", "cpu_ratio_max"):
        del result[key]  # the baseline's work is in the server: only wall-clock compares
    emit("etcd_list", "seconds", result.pop("value"), result.pop("baseline"), keys=count,
         baseline_is="one raw Range", target_ratio=2.0, **result)  # fmt: skip


def bench_list_only(endpoints: str, keys: int) -> None:
    """Just the list: the keys written in Txns of 64 Puts (quick), then ``bench_list``."""
    import grpc

    backend = EtcdBackend(endpoints)
    channel = grpc.insecure_channel(endpoints.split("//")[1], CHANNEL_OPTIONS)
    kv = rpc_pb2_grpc.KVStub(channel)
    prefix = "/calico/resources/v3/projectcalico.org/ippools/"
    value = VALUE.encode()
    for first in range(0, keys, 64):
        puts = [
            rpc_pb2.RequestOp(
                request_put=rpc_pb2.PutRequest(key=f"{prefix}pool-{i:07d}".encode(), value=value)
            )
            for i in range(first, min(keys, first + 64))
        ]
        kv.Txn(rpc_pb2.TxnRequest(success=puts))
    bench_list(backend, kv, prefix, keys)
    channel.close()
    backend.close()


def writer(target: str, prefix: str) -> None:
    """Subprocess body: ``N_LATENCY`` Puts of the wall-clock time, ``WRITE_GAP`` apart."""
    import grpc

    channel = grpc.insecure_channel(target, CHANNEL_OPTIONS)
    kv = rpc_pb2_grpc.KVStub(channel)
    kv.Range(rpc_pb2.RangeRequest(key=b"/"))  # connected before the parent starts timing
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()
    rtts: list[float] = []
    for i in range(N_LATENCY):
        stamp = time.time()
        kv.Put(rpc_pb2.PutRequest(key=f"{prefix}{i % 10}".encode(), value=repr(stamp).encode()))
        rtts.append(time.time() - stamp)
        time.sleep(WRITE_GAP)
    channel.close()
    sys.stdout.write(json.dumps(rtts) + "\n")  # the Puts' own round trips, for the report
    sys.stdout.flush()


def timed_writes(target: str, prefix: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--writer", target, prefix],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()


def finish(proc: subprocess.Popen[str], rtts: list[float]) -> None:
    """Wait for the writer and collect its Put round trips."""
    assert proc.stdout is not None
    out, _ = proc.communicate(timeout=30)
    rtts += json.loads(out)


def backend_latency(endpoints: str, prefix: str, rtts: list[float]) -> list[float]:
    backend = EtcdBackend(endpoints)
    proc = timed_writes(endpoints.split("//")[1], prefix)
    watch = backend.watch(prefix, backend.current_revision())
    samples: list[float] = []
    try:
        time.sleep(0.2)  # the stream is open (a watch from the current revision replays nothing)
        release(proc)
        while len(samples) < N_LATENCY:
            event = watch.next(10)
            assert event is not None and event.value is not None, "writer stalled"
            samples.append(time.time() - float(event.value))
    finally:
        watch.stop()
        finish(proc, rtts)
        backend.close()
    return samples


def raw_latency(target: str, prefix: str, rtts: list[float]) -> list[float]:
    import grpc

    channel = grpc.insecure_channel(target, CHANNEL_OPTIONS)
    stub = rpc_pb2_grpc.WatchStub(channel)
    start, end = prefix_range(prefix)
    done = threading.Event()

    def requests():  # type: ignore[no-untyped-def]
        create = rpc_pb2.WatchCreateRequest(key=start, range_end=end)
        yield rpc_pb2.WatchRequest(create_request=create)
        done.wait()

    proc = timed_writes(target, prefix)
    samples: list[float] = []
    call = stub.Watch(requests())
    try:
        for resp in call:
            if resp.created:
                release(proc)
            for ev in resp.events:
                samples.append(time.time() - float(ev.kv.value))
            if len(samples) >= N_LATENCY:
                break
    finally:
        done.set()
        call.cancel()
        finish(proc, rtts)
        channel.close()
    return samples


def both_latency(endpoints: str, prefix: str) -> list[tuple[float, float]]:
    """One raw stream (its own thread, iterating gRPC directly) and one EtcdWatch on the same
    writes: per event, (raw arrival, ours arrival) as seconds after the write started, so
    ``ours - raw`` is what our watch path adds to that very event."""
    import grpc

    target = endpoints.split("//")[1]
    channel = grpc.insecure_channel(target, CHANNEL_OPTIONS)
    stub = rpc_pb2_grpc.WatchStub(channel)
    start, end = prefix_range(prefix)
    done = threading.Event()
    created = threading.Event()
    raw: dict[str, float] = {}

    def requests():  # type: ignore[no-untyped-def]
        create = rpc_pb2.WatchCreateRequest(key=start, range_end=end)
        yield rpc_pb2.WatchRequest(create_request=create)
        done.wait()

    call = stub.Watch(requests())

    def read_raw() -> None:
        with contextlib.suppress(grpc.RpcError):
            for resp in call:
                created.set()
                for ev in resp.events:
                    raw[ev.kv.value.decode()] = time.time()

    reader = threading.Thread(target=read_raw, daemon=True)
    reader.start()
    backend = EtcdBackend(endpoints)
    proc = timed_writes(target, prefix)
    watch = backend.watch(prefix, backend.current_revision())
    ours: dict[str, float] = {}
    try:
        assert created.wait(10), "raw watch not created"
        time.sleep(0.2)  # our stream is open too
        release(proc)
        while len(ours) < N_LATENCY:
            event = watch.next(10)
            assert event is not None and event.value is not None, "writer stalled"
            ours[event.value] = time.time()
    finally:
        watch.stop()
        finish(proc, [])
        deadline = time.monotonic() + 10
        while len(raw) < len(ours) and time.monotonic() < deadline:
            time.sleep(0.01)
        done.set()
        call.cancel()
        reader.join(10)
        channel.close()
        backend.close()
    return [(raw[v] - float(v), ours[v] - float(v)) for v in ours if v in raw]


def quantile(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[round(q * 100) - 1]


def bench_watch_latency(endpoints: str, data_dir_on: str) -> None:
    """Raw and ours alternately (``WATCH_ROUNDS`` each), all samples pooled per side.

    Every sample counts the writer's whole Put (gRPC call, raft, WAL fsync, apply) before the
    event exists: ``put_rtt_*`` report the Puts' own round trips, the part no watch can beat."""
    target = endpoints.split("//")[1]
    raw: list[float] = []
    ours: list[float] = []
    rtts: list[float] = []
    for i in range(WATCH_ROUNDS):
        raw += raw_latency(target, f"/lat-raw{i}/", rtts)
        ours += backend_latency(endpoints, f"/lat{i}/", rtts)
    both: list[tuple[float, float]] = []
    for i in range(WATCH_ROUNDS):
        both += both_latency(endpoints, f"/lat-both{i}/")
    added = [o - r for r, o in both]
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        emit(f"etcd_watch_added_{name}", "seconds", quantile(added, q),
             quantile([r for r, _ in both], q), samples=len(both), data_dir_on=data_dir_on,
             baseline_is="raw stream's write-to-event, same events")  # fmt: skip
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        emit(f"etcd_watch_latency_{name}", "seconds", quantile(ours, q), quantile(raw, q),
             samples=len(ours), target=0.002 if name == "p99" else None, max=max(ours),
             put_rtt=round(quantile(rtts, q), 6), data_dir_on=data_dir_on,
             baseline_is="raw gRPC Watch stream, same writer")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1:2] == ["--writer"]:
        writer(sys.argv[2], sys.argv[3])
    else:
        sys.exit(main())
