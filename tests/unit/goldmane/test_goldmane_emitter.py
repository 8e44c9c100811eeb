"""The HTTP emitter against a real local HTTP server: ndjson body, retries, checkpoint, switch."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from http_sink import Sink

from calico.backoff import Backoff
from calico.goldmane.emitter import Checkpoint, Emitter, SinkSwitch, go_json, ndjson
from calico.goldmane.ring import FlowCollection
from calico.goldmane.server import Goldmane
from calico.goldmane.types import Counters, Flow, FlowKey, PolicyHit
from calico.proto.goldmane import api_pb2 as pb


@pytest.fixture
def sink() -> Iterator[Sink]:
    s = Sink()
    yield s
    s.close()


def flow(dest: str, start: int, packets: int = 1) -> Flow:
    hit = PolicyHit(pb.CalicoNetworkPolicy, "ns", "allow", "default", pb.Allow, 0, 2, None)
    key = FlowKey(
        "src", "ns", pb.WorkloadEndpoint, dest, "ns", pb.WorkloadEndpoint, 80,
        "", "", "", 0, "tcp", pb.Dst, pb.Allow, (hit,), (),
    )  # fmt: skip
    return Flow(
        key, start, start + 15, frozenset({"app=a"}), frozenset(), Counters(packets_in=packets)
    )


def collection(start: int, *dests: str) -> FlowCollection:
    return FlowCollection(start, start + 300, [flow(d, start) for d in dests])


def wait_idle(e: Emitter) -> None:
    deadline = time.monotonic() + 20
    while not e.idle():
        assert time.monotonic() < deadline, "emitter never went idle"
        time.sleep(0.01)


def make(sink: Sink, tmp_path: Path, retries: int = 15) -> Emitter:
    e = Emitter(sink.url, Checkpoint(str(tmp_path / "state.json")), max_retries=retries,
                backoff=Backoff(0.01, 0.04))  # fmt: skip
    e.start()
    return e


def test_go_json_is_encoding_json_of_the_proto_struct() -> None:
    body = ndjson(collection(1_700_000_100, "a", "b"))
    lines = [json.loads(line) for line in body.decode().split("\n")]
    assert [line["Key"]["dest_name"] for line in lines] == ["a", "b"]
    first = lines[0]
    assert first["Key"]["action"] == pb.Allow and first["Key"]["proto"] == "tcp"
    assert "dest_service_name" not in first["Key"]  # omitempty
    assert first["Key"]["policies"]["enforced_policies"][0]["rule_index"] == 2
    assert first["source_labels"] == ["app=a"] and "dest_labels" not in first
    assert first["packets_in"] == 1 and isinstance(first["start_time"], int)
    assert go_json(pb.Flow()) == {}


def test_posts_ndjson_and_checkpoints_so_a_restart_does_not_resend(
    sink: Sink, tmp_path: Path
) -> None:
    e = make(sink, tmp_path)
    e.receive([collection(1000, "a"), collection(1300, "b", "c")])
    wait_idle(e)
    assert [ct for ct, _ in sink.posts] == ["application/x-ndjson"] * 2
    assert sink.posts[1][1].count(b"\n") == 1
    assert json.loads((tmp_path / "state.json").read_text()) == {"latestTimestamp": "1600"}
    e.receive([collection(1300, "b", "c")])  # the same window again: skipped
    wait_idle(e)
    assert len(sink.posts) == 2
    e.stop()

    again = make(sink, tmp_path)
    assert again.latest == 1600
    again.receive([collection(1000, "a"), collection(1300, "b"), collection(1600, "d")])
    wait_idle(again)
    assert len(sink.posts) == 3 and b'"dest_name":"d"' in sink.posts[2][1]
    again.stop()


def test_failures_are_retried_with_backoff_then_dropped(sink: Sink, tmp_path: Path) -> None:
    e = make(sink, tmp_path, retries=3)
    sink.statuses = [500, 503]
    e.receive([collection(1000, "a")])
    wait_idle(e)
    assert (len(sink.posts), e.failed, e.sent, e.dropped) == (3, 2, 1, 0)
    sink.statuses = [500] * 4  # 1 try + 3 retries, all failing: dropped, not checkpointed
    e.receive([collection(1300, "b")])
    wait_idle(e)
    assert (len(sink.posts), e.dropped, e.latest) == (7, 1, 1300)
    e.receive([collection(1600, "c")])  # later collections still go out
    wait_idle(e)
    assert (len(sink.posts), e.latest) == (8, 1900)
    e.stop()


def test_unreachable_endpoint_counts_failures(tmp_path: Path) -> None:
    s = Sink()
    url = s.url
    s.close()
    e = Emitter(url, Checkpoint(str(tmp_path / "s.json")), max_retries=1,
                backoff=Backoff(0.01, 0.01))  # fmt: skip
    e.start()
    e.receive([collection(1000, "a")])
    wait_idle(e)
    assert (e.failed, e.dropped, e.latest) == (2, 1, 0)
    assert not (tmp_path / "s.json").exists()
    e.stop()


def test_unreadable_checkpoint_starts_from_zero(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text("{not json")
    assert Checkpoint(str(path)).load() == 0
    path.write_text('{"latestTimestamp": "42"}')
    assert Checkpoint(str(path)).load() == 42
    assert Checkpoint(str(tmp_path / "missing")).load() == 0


def test_sink_switch_polls_the_file_every_30s(tmp_path: Path) -> None:
    now = [0.0]
    assert SinkSwitch("", lambda: now[0]).enabled()
    path = tmp_path / "config.json"
    switch = SinkSwitch(str(path), lambda: now[0])
    assert not switch.enabled()  # no file: off
    path.write_text('{"emitFlows": true}')
    now[0] = 29.9
    assert not switch.enabled()  # not re-read yet
    now[0] = 30.0
    assert switch.enabled()
    path.write_text('{"emitFlows": "yes"}')
    now[0] = 60.0
    assert not switch.enabled()


def test_engine_hands_due_collections_to_the_sink_once_and_only_when_enabled() -> None:
    t = [1_700_000_010.0]  # on a 15 s bucket boundary
    gm = Goldmane(15, clock=lambda: t[0], num_buckets=20)
    got: list[FlowCollection] = []
    gm.sink, gm.emit_shape = got.extend, (2, 1)
    enabled = [False]
    gm.sink_enabled = lambda: enabled[0]
    start = int(t[0])
    gm.receive("h", pb.Flow(Key=pb.FlowKey(dest_name="x"), start_time=start, packets_in=4))
    for _ in range(4):
        t[0] += 15
        gm.rollover()
    assert got == []  # disabled: buckets stay unpushed
    enabled[0] = True
    t[0] += 15
    gm.rollover()
    assert [(c.start - start, c.end - start, len(c.flows)) for c in got] == [(0, 30, 1)]
    for _ in range(5):
        t[0] += 15
        gm.rollover()
    assert len(got) == 1  # emitted once
    assert gm.rollovers == 10 and gm.rollover_ms > 0
