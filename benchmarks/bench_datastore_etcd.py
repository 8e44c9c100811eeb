"""etcdv3 backend benchmarks against a real etcd this script starts (default raft ticks).

Run as ``python benchmarks/bench_datastore_etcd.py [--keys N] [--threads T]``. Prints JSON lines
via ``harness.emit``; every baseline is raw gRPC on our generated stubs in the same run, so the
ratio is the cost of the Backend layer (CAS transactions, encoding, KVPair objects, paging):

* ``etcd_create``: EtcdBackend.create (Txn on create_revision == 0) per second with T threads,
  N keys (default 100,000; stops early at a time budget and reports the keys actually written)
  vs plain Put requests per second with the same threads.
* ``etcd_serial_create``: ms per create from one thread vs ms per plain Put.
* ``etcd_list``: seconds to list all N keys (paged Range at one revision, KVPairs) vs one
  unpaged Range request over the same keys.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import sys
import time
from collections.abc import Callable
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(_ROOT))
sys.path.insert(0, str(_ROOT.parent))

from harness import best_of, emit  # noqa: E402

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
    args = parser.parse_args()

    import grpc

    with EtcdServer(fast_leases=False) as server:
        backend = EtcdBackend(server.endpoints)
        channel = grpc.insecure_channel(server.endpoints.split("//")[1], CHANNEL_OPTIONS)
        kv = rpc_pb2_grpc.KVStub(channel)
        value = VALUE.encode()

        def raw_put(i: int, prefix: str = "/raw/") -> None:
            kv.Put(rpc_pb2.PutRequest(key=f"{prefix}{i:07d}".encode(), value=value))

        # Baseline first (warms the server up too).
        t0 = time.perf_counter()
        run_parallel(raw_put, RAW_KEYS, args.threads, BUDGET_S)
        raw_rate = RAW_KEYS / (time.perf_counter() - t0)

        prefix = "/calico/resources/v3/projectcalico.org/ippools/"
        t0 = time.perf_counter()
        written = run_parallel(
            lambda i: backend.create(f"{prefix}pool-{i:07d}", VALUE),
            args.keys,
            args.threads,
            BUDGET_S,
        )
        rate = written / (time.perf_counter() - t0)
        emit(
            "etcd_create",
            "creates_per_s",
            rate,
            raw_rate,
            keys=written,
            requested_keys=args.keys,
            threads=args.threads,
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

        count = len(backend.list(prefix).kvs)
        assert count == written, (count, written)
        start, end = prefix_range(prefix)
        req = rpc_pb2.RangeRequest(key=start, range_end=end)
        list_s = best_of(lambda: backend.list(prefix), repeat=3)
        raw_s = best_of(lambda: kv.Range(req), repeat=3)
        emit("etcd_list", "seconds", list_s, raw_s, keys=count, baseline_is="one raw Range")

        channel.close()
        backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
