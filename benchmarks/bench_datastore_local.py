"""Local (SQLite) datastore benchmarks: write throughput, list time, cross-process watch latency.

Run as ``python benchmarks/bench_datastore_local.py``. Prints JSON lines via ``harness.emit``:

* ``datastore_local_write``: ``create`` per second for 100,000 keys, one transaction each (value)
  vs raw sqlite3 single-row INSERT transactions in the same WAL/synchronous mode (baseline): the
  ratio is what revisions, the change log and CAS checks cost.
* ``datastore_local_write_batched``: ``apply_many`` in batches of 1,000 vs raw ``executemany``.
* ``datastore_local_list``: seconds to list 100,000 keys (value, median of 9 rounds; target
  <= 1 s and <= 2x) vs a raw SELECT of the same rows (baseline) made back to back in each round;
  ``ratio_min``/``ratio_median``/``ratio_max`` are the per-round ratios.
* ``datastore_local_watch_latency_p50`` / ``_p99``: seconds from a write in another process to
  the event leaving ``watch.next`` (value; target p99 <= 0.002, issue 23) vs the same
  measurement for a write in the watching process (baseline, no cross-process wake-up
  involved). ``--watch-only`` runs just this; ``--list-only`` just the list (tables filled in
  batches).
"""

from __future__ import annotations

import json
import sqlite3
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

from calico.datastore.local import LocalBackend  # noqa: E402

N_KEYS = 100_000
BATCH = 1_000
N_LATENCY = 400
LIST_ROUNDS = 9
WRITE_GAP = 0.005  # between timestamped writes, so each latency sample is independent
PREFIX = "/calico/resources/v3/projectcalico.org/workloadendpoints/ns1/"
VALUE = json.dumps({"spec": {"node": "node1", "ipNetworks": ["10.0.0.1/32"], "labels": {}}})


def keys() -> list[str]:
    return [f"{PREFIX}wep-{i:06d}" for i in range(N_KEYS)]


def raw_db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID")
    return conn


def bench_writes_and_list(tmp: Path) -> None:
    names = keys()
    raw = raw_db(tmp / "raw.db")
    start = time.perf_counter()
    for key in names:
        raw.execute("BEGIN IMMEDIATE")
        raw.execute("INSERT INTO kv VALUES (?, ?)", (key, VALUE))
        raw.execute("COMMIT")
    raw_rate = N_KEYS / (time.perf_counter() - start)

    with LocalBackend(tmp / "calico.db") as backend:
        start = time.perf_counter()
        for key in names:
            backend.create(key, VALUE)
        rate = N_KEYS / (time.perf_counter() - start)
        emit("datastore_local_write", "writes_per_s", rate, raw_rate, keys=N_KEYS)

        raw_batched = raw_db(tmp / "raw_batched.db")
        start = time.perf_counter()
        for i in range(0, N_KEYS, BATCH):
            raw_batched.execute("BEGIN IMMEDIATE")
            raw_batched.executemany(
                "INSERT INTO kv VALUES (?, ?)", ((k, VALUE) for k in names[i : i + BATCH])
            )
            raw_batched.execute("COMMIT")
        raw_batched_rate = N_KEYS / (time.perf_counter() - start)
        start = time.perf_counter()
        for i in range(0, N_KEYS, BATCH):
            backend.apply_many((k, VALUE) for k in names[i : i + BATCH])
        batched_rate = N_KEYS / (time.perf_counter() - start)
        emit(
            "datastore_local_write_batched",
            "writes_per_s",
            batched_rate,
            raw_batched_rate,
            keys=N_KEYS,
            batch=BATCH,
        )

        bench_list(backend, raw)
    raw.close()
    raw_batched.close()


def bench_list(backend: LocalBackend, raw: sqlite3.Connection) -> None:
    listed = backend.list(PREFIX)
    assert len(listed.kvs) == N_KEYS
    del listed
    result = paired_rounds(
        lambda: backend.list(PREFIX),
        lambda: raw.execute(
            "SELECT key, value FROM kv WHERE key >= ? ORDER BY key", (PREFIX,)
        ).fetchall(),
        rounds=LIST_ROUNDS,
    )
    emit(
        "datastore_local_list",
        "seconds",
        result.pop("value"),
        result.pop("baseline"),
        keys=N_KEYS,
        target=1.0,
        target_ratio=2.0,
        **result,
    )


def bench_list_only(tmp: Path) -> None:
    """Just the list: both tables filled in batches (quick), then ``bench_list``."""
    names = keys()
    raw = raw_db(tmp / "raw.db")
    raw.execute("BEGIN IMMEDIATE")
    raw.executemany("INSERT INTO kv VALUES (?, ?)", ((k, VALUE) for k in names))
    raw.execute("COMMIT")
    with LocalBackend(tmp / "calico.db") as backend:
        for i in range(0, N_KEYS, BATCH):
            backend.apply_many((k, VALUE) for k in names[i : i + BATCH])
        bench_list(backend, raw)
    raw.close()


def measure_latency(backend: LocalBackend, start_writer: Callable[[], None]) -> list[float]:
    """Watch, call ``start_writer``, and time each timestamped event's arrival."""
    samples: list[float] = []
    watch = backend.watch("/lat/", backend.current_revision())
    try:
        start_writer()
        while len(samples) < N_LATENCY:
            event = watch.next(10)
            assert event is not None and event.value is not None, "writer stalled"
            samples.append(time.time() - json.loads(event.value))
    finally:
        watch.stop()
    return samples


def writer(path: str) -> None:
    """Subprocess body: timestamped writes, ``WRITE_GAP`` apart."""
    with LocalBackend(path) as backend:
        sys.stdin.readline()  # the parent is watching
        for i in range(N_LATENCY):
            backend.apply(f"/lat/{i % 10}", json.dumps(time.time()))
            time.sleep(WRITE_GAP)


def quantile(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[round(q * 100) - 1]


def bench_watch_latency(tmp: Path) -> None:
    path = tmp / "latency.db"
    with LocalBackend(path) as backend:

        def local_writes() -> None:
            for i in range(N_LATENCY):
                backend.apply(f"/lat/{i % 10}", json.dumps(time.time()))
                time.sleep(WRITE_GAP)

        thread = threading.Thread(target=local_writes)
        local = measure_latency(backend, thread.start)
        thread.join()
        proc = subprocess.Popen(
            [sys.executable, __file__, "--writer", str(path)], stdin=subprocess.PIPE, text=True
        )
        try:
            # Start the watch before releasing the writer, so no write precedes it.
            def release() -> None:
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()

            remote = measure_latency(backend, release)
        finally:
            proc.wait(timeout=30)
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        emit(
            f"datastore_local_watch_latency_{name}",
            "seconds",
            quantile(remote, q),
            quantile(local, q),
            samples=N_LATENCY,
            target=0.002 if name == "p99" else None,
            max=max(remote),
        )


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-datastore-") as tmp:
        bench_writes_and_list(Path(tmp))
        bench_watch_latency(Path(tmp))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--writer"]:
        writer(sys.argv[2])
    elif sys.argv[1:] == ["--watch-only"]:
        with tempfile.TemporaryDirectory(prefix="bench-datastore-") as tmp:
            bench_watch_latency(Path(tmp))
    elif sys.argv[1:] == ["--list-only"]:
        with tempfile.TemporaryDirectory(prefix="bench-datastore-") as tmp:
            bench_list_only(Path(tmp))
    else:
        main()
