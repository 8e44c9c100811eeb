"""Config parsing, dedup, peer naming, stream limits and the rollover timer."""

from __future__ import annotations

import asyncio

import pytest

from calico.goldmane.config import ConfigError, load_config
from calico.goldmane.convert import KeyCache, key_from_proto
from calico.goldmane.dedup import DedupCache
from calico.goldmane.ring import FlowResult
from calico.goldmane.server import Goldmane, peer_host
from calico.goldmane.streams import StreamManager, TooManyStreamsError
from calico.goldmane.types import Counters, Flow, FlowKey
from calico.proto.goldmane import api_pb2 as pb


def test_defaults_are_upstreams() -> None:
    cfg = load_config({})
    assert (cfg.port, cfg.health_enabled, cfg.health_port, cfg.aggregation_window) == (
        443,
        True,
        8080,
        15.0,
    )
    assert (cfg.emit_after_seconds, cfg.emitter_aggregation_window) == (30, 300.0)
    assert cfg.server_name == "tigera-linseed.tigera-elasticsearch.svc"
    assert (cfg.log_level, cfg.push_url, cfg.tls) == ("info", "", False)


def test_values_parse_as_go() -> None:
    cfg = load_config(
        {
            "PORT": "7443",
            "AGGREGATION_WINDOW": "1m",
            "HEALTH_ENABLED": "F",
            "EMIT_AFTER_SECONDS": "45",
        }
    )
    assert (cfg.port, cfg.aggregation_window, cfg.health_enabled, cfg.emit_after_seconds) == (
        7443,
        60.0,
        False,
        45,
    )
    with pytest.raises(ConfigError, match="PORT: port 65536 out of range 0-65535"):
        load_config({"PORT": "65536"})
    with pytest.raises(ConfigError, match="CA_CERT_PATH: required"):
        load_config({"SERVER_CERT_PATH": "/a", "SERVER_KEY_PATH": "/b"})
    assert load_config(
        {"SERVER_CERT_PATH": "/a", "SERVER_KEY_PATH": "/b", "CA_CERT_PATH": "/c"}
    ).tls


def test_dedup_per_peer_until_expiry() -> None:
    d = DedupCache(ttl=300)
    assert not d.is_duplicate("10.0.0.1", b"flow", 0)
    assert d.is_duplicate("10.0.0.1", b"flow", 299.9)  # refreshed: now lives until 599.9
    assert not d.is_duplicate("10.0.0.2", b"flow", 300)
    assert d.is_duplicate("10.0.0.1", b"flow", 599)
    assert not d.is_duplicate("10.0.0.1", b"flow", 899.0)
    d.expire(10_000)
    assert len(d) == 0


@pytest.mark.parametrize(
    ("peer", "host"),
    [
        ("ipv4:127.0.0.1:5555", "127.0.0.1"),
        ("ipv6:[::1]:5555", "::1"),
        ("unix:/run/x.sock", "/run/x.sock"),
    ],
)
def test_peer_host_drops_the_port(peer: str, host: str) -> None:
    assert peer_host(peer) == host


def _result(name: str) -> FlowResult:
    return FlowResult(1, Flow(FlowKey(dest_name=name), 0, 15, frozenset(), frozenset(), Counters()))


def test_stream_limit_and_filtered_publish() -> None:
    async def go() -> None:
        m = StreamManager(max_streams=2)
        a = m.open(lambda k: k.dest_name == "a", [_result("old")])
        m.open(lambda k: True, [])
        with pytest.raises(TooManyStreamsError, match=r"too many streams \(maximum 2\)"):
            m.open(lambda k: True, [])
        m.publish([_result("a"), _result("b")])
        got = [a.queue.get_nowait().flow.key.dest_name for _ in range(a.queue.qsize())]
        assert got == ["old", "a"]
        m.close(a)
        assert len(m) == 1
        m.open(lambda k: True, [])

    asyncio.run(go())


def test_rollover_timer_follows_bucket_ends_without_drift() -> None:
    t = [1_700_000_012.5]  # 2.5 s into the bucket starting at ...010
    gm = Goldmane(15, clock=lambda: t[0], num_buckets=10)
    rolled: list[float] = []
    gm.on_rollover = lambda: rolled.append(t[0])
    stop = asyncio.Event()
    waits: list[float] = []

    async def late_sleep(delay: float) -> None:
        waits.append(delay)
        t[0] += delay + 0.4  # every wake-up is 0.4 s late
        if len(rolled) == 5:
            stop.set()

    asyncio.run(gm.run_rollovers(stop, sleep=late_sleep))
    # Lateness never accumulates: each rollover is 0.4 s after its own bucket end.
    assert rolled == pytest.approx([1_700_000_025.4 + 15 * i for i in range(5)])
    assert waits[0] == pytest.approx(12.5) and waits[1] == pytest.approx(14.6)


def test_a_rollover_behind_schedule_catches_up_at_10ms_steps() -> None:
    t = [1_700_000_010.0]
    gm = Goldmane(15, clock=lambda: t[0], num_buckets=10)
    t[0] += 46  # the process was stopped for three buckets
    stop = asyncio.Event()
    waits: list[float] = []

    async def sleep(delay: float) -> None:
        waits.append(delay)
        if len(waits) == 4:
            stop.set()

    asyncio.run(gm.run_rollovers(stop, sleep=sleep))
    assert waits == [0.01, 0.01, 0.01, pytest.approx(14.0)]
    assert gm.ring.head_start == 1_700_000_010 + 15 + 3 * 15


def test_receive_counts_dropped_and_duplicates() -> None:
    gm = Goldmane(15, clock=lambda: 1_700_000_010.0)
    f = pb.Flow(Key=pb.FlowKey(dest_name="x"), start_time=1_700_000_011)
    gm.receive("h", f)
    gm.receive("h", f)
    gm.receive("h", pb.Flow(Key=pb.FlowKey(dest_name="x"), start_time=1))
    assert (gm.received, gm.duplicates, gm.dropped, gm.ring.num_keys) == (3, 1, 1, 1)


def test_key_cache_converts_once_and_is_bounded() -> None:
    cache = KeyCache(limit=2)
    a = pb.FlowKey(
        dest_name="a", policies=pb.PolicyTrace(enforced_policies=[pb.PolicyHit(name="p")])
    )
    first = cache.get(a)
    assert cache.get(pb.FlowKey.FromString(a.SerializeToString())) is first
    assert first == key_from_proto(a)
    cache.get(pb.FlowKey(dest_name="b"))
    assert len(cache) == 2
    cache.get(pb.FlowKey(dest_name="c"))  # full: dropped whole, then this one added
    assert len(cache) == 1
    assert cache.get(a) is not first and cache.get(a) == first


def test_rollover_without_streams_copies_nothing_but_advances_the_same() -> None:
    def ring_with_flow() -> Goldmane:
        gm = Goldmane(15, clock=lambda: 1_700_000_010.0)
        gm.receive("h", pb.Flow(Key=pb.FlowKey(dest_name="x"), start_time=1_700_000_010))
        return gm

    collected, skipped = ring_with_flow().ring, ring_with_flow().ring
    got = [collected.rollover(), collected.rollover()]
    assert [skipped.rollover(collect=False), skipped.rollover(collect=False)] == [[], []]
    assert [len(r) for r in got] == [0, 1]  # the flow's bucket became the streaming one
    assert (collected.head_start, collected.num_keys) == (skipped.head_start, skipped.num_keys)
    req = pb.FlowListRequest()
    assert collected.list(req, 1_700_000_040).flows == skipped.list(req, 1_700_000_040).flows
