"""The real goldmane process: PUSH_URL emission and its checkpoint across a restart; metrics."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import requests
from http_sink import Sink

from calico.proto.goldmane import api_pb2 as pb
from calico.proto.goldmane import api_pb2_grpc as pb_grpc

# The directory's conftest fixture; not imported by name (``conftest`` is ambiguous in a full run).
Start = Callable[[dict[str, str]], Any]


@pytest.fixture
def sink() -> Iterator[Sink]:
    s = Sink()
    yield s
    s.close()


def push(port: int, flows: list[pb.Flow]) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        updates = iter([pb.FlowUpdate(flow=f) for f in flows])
        assert sum(1 for _ in pb_grpc.FlowCollectorStub(ch).Connect(updates, timeout=10)) == len(
            flows
        )


def flow(dest: str, start: int) -> pb.Flow:
    return pb.Flow(
        Key=pb.FlowKey(dest_name=dest, proto="tcp", dest_port=80, action=pb.Allow),
        start_time=start,
        end_time=start + 1,
        packets_in=5,
    )


def posted_dests(sink: Sink) -> list[str]:
    return [
        json.loads(line)["Key"]["dest_name"]
        for _, body in sink.posts
        for line in body.decode().splitlines()
    ]


def wait_until(cond: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_emits_windows_and_a_restart_does_not_resend(
    start_goldmane: Start, sink: Sink, tmp_path: Path
) -> None:
    env = {
        "AGGREGATION_WINDOW": "1s",
        "EMITTER_AGGREGATION_WINDOW": "1s",
        "EMIT_AFTER_SECONDS": "1",
        "PUSH_URL": sink.url,
        "EMITTER_STATE_PATH": str(tmp_path / "state" / "emitter.json"),
    }
    first = start_goldmane(env)
    old = flow("before-restart", int(time.time()))
    push(first.port, [old])
    wait_until(lambda: posted_dests(sink) == ["before-restart"], "first window not emitted")
    assert sink.posts[0][0] == "application/x-ndjson"
    # The checkpoint is saved only after the POST has been answered: wait for it, not the post.
    state_path = tmp_path / "state" / "emitter.json"
    wait_until(state_path.exists, "checkpoint not saved after the window was accepted")
    state = json.loads(state_path.read_text())
    assert int(state["latestTimestamp"]) > old.start_time
    assert first.stop() == 0

    second = start_goldmane(env)
    second.wait_log(rf"checkpoint {state['latestTimestamp']}\)")
    # Felix resends its recent flows to the new Goldmane; only the new one may go out.
    push(second.port, [old, flow("after-restart", int(time.time()))])
    wait_until(lambda: "after-restart" in posted_dests(sink), "new window not emitted")
    assert posted_dests(sink) == ["before-restart", "after-restart"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_prometheus_metrics(start_goldmane: Start) -> None:
    metrics_port = free_port()
    p = start_goldmane({"AGGREGATION_WINDOW": "1s", "PROMETHEUS_PORT": str(metrics_port)})
    p.wait_log(r"Prometheus metrics listening")
    now = int(time.time())
    push(p.port, [flow("a", now), flow("b", now), flow("old", 1)])

    def scrape() -> dict[str, float]:
        text = requests.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).text
        return {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("goldmane_")
        }

    wait_until(lambda: scrape().get("goldmane_collector_num_clients") == 0.0, "collector open")
    values = scrape()
    assert values["goldmane_aggr_received_flows_total"] == 3
    assert values["goldmane_aggr_dropped_flows_total"] == 1
    assert values["goldmane_aggr_num_unique_flows"] == 2
    assert values['goldmane_collector_received_flows{source="127.0.0.1"}'] == 3
    assert values["goldmane_num_streams"] == 0
    wait_until(lambda: scrape()["goldmane_aggr_rollover_duration_ms_count"] >= 2, "no rollover")
    assert "goldmane_aggr_rollover_latency_ms_sum" in scrape()
