"""Goldmane benchmark: List latency over 100,000 flow keys and gRPC ingest from 10 collectors.

Run as ``python benchmarks/bench_goldmane.py``. Metrics:

* ``goldmane_list_first_page_ms``: ``BucketRing.list`` of the first 100-flow page (default
  time sort, no filter) with 100,000 distinct keys in the last bucket; baseline is the naive
  reference store answering the same query. Target <= 200 ms.
* ``goldmane_list_filtered_page_ms``: the same with a fuzzy dest-name filter matching 1/10.
* ``goldmane_ingest_flows_per_s``: flows per second pushed over FlowCollector.Connect to a real
  ``calico component goldmane`` by 10 concurrent collectors (one channel and stream each);
  baseline is one collector pushing the same total. Target >= 50,000 flows/s.
* ``goldmane_ingest_server_cpu_us_per_flow``: the goldmane process's CPU time per flow in the
  10-collector run; baseline is the floor of Python gRPC itself: a bare ``grpc.aio`` server
  answering the same stream with an empty receipt per message, doing nothing else, pushed by
  the same clients. The ratio is what Goldmane's own work adds to the per-message cost.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(_ROOT))
sys.path.insert(0, str(_ROOT.parent))

import grpc  # noqa: E402
from harness import best_of, emit  # noqa: E402

from calico.goldmane.naive import NaiveStore  # noqa: E402
from calico.goldmane.ring import BucketRing  # noqa: E402
from calico.goldmane.types import Counters, Flow, FlowKey, PolicyHit  # noqa: E402
from calico.proto.goldmane import api_pb2 as pb  # noqa: E402
from calico.proto.goldmane import api_pb2_grpc as pb_grpc  # noqa: E402

KEYS = 100_000
COLLECTORS = 10
PER_COLLECTOR = 5_000
HIT = PolicyHit(pb.CalicoNetworkPolicy, "ns", "allow", "default", pb.Allow, 0, 0)


def _flow(i: int, now: int) -> Flow:
    key = FlowKey(
        source_name=f"client-{i % 1000}",
        source_namespace=f"ns{i % 10}",
        source_type=pb.WorkloadEndpoint,
        dest_name=f"server-{i // 10}",
        dest_namespace="ns",
        dest_type=pb.WorkloadEndpoint,
        dest_port=80 + i % 7,
        proto="tcp",
        reporter=pb.Dst,
        action=pb.Allow,
        enforced=(HIT,),
    )
    return Flow(
        key, now, now + 1, frozenset({"app=a"}), frozenset({"app=b"}), Counters(1, 1, 64, 64)
    )


def bench_list() -> None:
    now = 1_700_000_010
    ring, naive = BucketRing(now), NaiveStore(now)
    for i in range(KEYS):
        f = _flow(i, now)
        ring.add(f)
        naive.add(f)
    for metric, req in (
        ("goldmane_list_first_page_ms", pb.FlowListRequest(page_size=100)),
        (
            "goldmane_list_filtered_page_ms",
            pb.FlowListRequest(
                page_size=100,
                filter=pb.Filter(dest_names=[pb.StringMatch(value="1", type=pb.Fuzzy)]),
            ),
        ),
    ):
        assert ring.list(req, now).flows[0].flow == naive.list(req, now).flows[0].flow
        value = best_of(lambda r=req: ring.list(r, now)) * 1000
        baseline = best_of(lambda r=req: naive.list(r, now), repeat=1) * 1000
        emit("goldmane", metric, value, baseline, keys=KEYS, target_ms=200)


def _push(port: int, base: int, n: int) -> None:
    now = int(time.time())
    updates = [
        pb.FlowUpdate(
            flow=pb.Flow(
                Key=pb.FlowKey(
                    source_name=f"c{base}", dest_name=f"s{i}", dest_port=80, proto="tcp"
                ),
                start_time=now,
                end_time=now + 1,
                packets_in=1,
            )
        )
        for i in range(n)
    ]
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        got = sum(1 for _ in pb_grpc.FlowCollectorStub(ch).Connect(iter(updates), timeout=300))
    assert got == n, (got, n)


def _ingest_rate(port: int, collectors: int, total: int, base: int) -> float:
    threads = [
        threading.Thread(target=_push, args=(port, base + c, total // collectors))
        for c in range(collectors)
    ]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return total / (time.perf_counter() - start)


FLOOR_SERVER = """
import asyncio, grpc
async def main():
    async def connect(requests, context):
        async for _ in requests:
            yield b""
    handler = grpc.method_handlers_generic_handler(
        "goldmane.FlowCollector", {"Connect": grpc.stream_stream_rpc_method_handler(connect)})
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    print(server.add_insecure_port("127.0.0.1:0"), flush=True)
    await server.start()
    await server.wait_for_termination()
asyncio.run(main())
"""


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _server_cpu_per_flow(pid: int, port: int, base: int) -> tuple[float, float]:
    """(flows/s, server CPU us per flow) of one 10-collector push to the server ``pid``."""
    total = COLLECTORS * PER_COLLECTOR
    before = _cpu_seconds(pid)
    rate = _ingest_rate(port, COLLECTORS, total, base)
    return rate, (_cpu_seconds(pid) - before) / total * 1e6


def bench_ingest() -> None:
    calico = Path(sys.executable).with_name("calico")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "goldmane.log"
        env = {**os.environ, "PORT": "0", "HEALTH_ENABLED": "false", "LOG_LEVEL": "warning"}
        env["LOG_LEVEL"] = "info"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(calico), "component", "goldmane"], env=env, stdout=out, stderr=out
            )
        try:
            deadline = time.monotonic() + 30
            while not (m := re.search(r"listening on port (\d+)", log.read_text())):
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
            port = int(m.group(1))
            total = COLLECTORS * PER_COLLECTOR
            baseline = _ingest_rate(port, 1, total, 0)
            before = _cpu_seconds(proc.pid)
            value = _ingest_rate(port, COLLECTORS, total, 100)
            gm_cpu = (_cpu_seconds(proc.pid) - before) / total * 1e6
            emit(
                "goldmane",
                "goldmane_ingest_flows_per_s",
                value,
                baseline,
                flows=total,
                collectors=COLLECTORS,
                target=50_000,
            )
        finally:
            proc.terminate()
            proc.wait(15)
    floor = subprocess.Popen(
        [sys.executable, "-c", FLOOR_SERVER], stdout=subprocess.PIPE, text=True
    )
    try:
        assert floor.stdout is not None
        floor_rate, floor_cpu = _server_cpu_per_flow(floor.pid, int(floor.stdout.readline()), 0)
    finally:
        floor.kill()
        floor.wait(15)
    emit(
        "goldmane",
        "goldmane_ingest_server_cpu_us_per_flow",
        gm_cpu,
        floor_cpu,
        goldmane_flows_per_s=round(value),
        grpc_floor_flows_per_s=round(floor_rate),
        flows=total,
        collectors=COLLECTORS,
    )


if __name__ == "__main__":
    bench_list()
    bench_ingest()
