"""Felix's Goldmane client against the real ``calico component goldmane``: receipts, flows
pushed while Goldmane is down delivered once it is up (reconnect with back-off), and the
resend cache replayed into a restarted Goldmane."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import grpc

from calico.backoff import Backoff
from calico.felix.collector.client import FlowClient
from calico.proto.goldmane import api_pb2 as pb
from calico.proto.goldmane import api_pb2_grpc as pb_grpc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def flow(port: int) -> pb.Flow:
    now = int(time.time())
    return pb.Flow(
        Key=pb.FlowKey(
            source_name="client",
            source_namespace="ns1",
            source_type=pb.WorkloadEndpoint,
            dest_name="server",
            dest_namespace="ns1",
            dest_type=pb.WorkloadEndpoint,
            dest_port=port,
            proto="tcp",
            reporter=pb.Dst,
            action=pb.Allow,
        ),
        start_time=now,
        end_time=now,
        packets_in=1,
        num_connections_started=1,
    )


def listed_ports(port: int) -> dict[int, int]:
    """dest port -> packets_in summed, from Flows.List."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        res = pb_grpc.FlowsStub(ch).List(pb.FlowListRequest(), timeout=10, wait_for_ready=True)
    out: dict[int, int] = {}
    for r in res.flows:
        out[r.flow.Key.dest_port] = out.get(r.flow.Key.dest_port, 0) + r.flow.packets_in
    return out


def wait_for(fn: Callable[[], object], expect: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last == expect:
            return
        time.sleep(0.1)
    raise AssertionError(f"expected {expect!r}, last {last!r}")


def test_reconnect_delivers_queued_flows_and_resends_to_a_restarted_goldmane(
    start_goldmane: Callable[[dict[str, str]], Any],  # conftest's GoldmaneProcess factory
) -> None:
    port = free_port()
    client = FlowClient(f"127.0.0.1:{port}", backoff=Backoff(0.2, 0.5))
    client.start()
    try:
        # Goldmane is not there yet: the flow waits in the queue while the client backs off.
        client.push(flow(8080))
        wait_for(lambda: client.connects == 0 and client.sent == 0, True, 2)
        first = start_goldmane({"PORT": str(port)})
        assert first.port == port
        wait_for(lambda: listed_ports(port), {8080: 1})
        # Goldmane lists the flow before the client has read its receipt: wait for that too.
        wait_for(lambda: client.sent, 1)  # one receipt per update
        client.push(flow(9090))
        wait_for(lambda: listed_ports(port), {8080: 1, 9090: 1})
        # A new Goldmane on the same address: the client reconnects and replays its cache.
        assert first.stop() == 0
        second = start_goldmane({"PORT": str(port)})
        assert second.port == port
        wait_for(lambda: listed_ports(port), {8080: 1, 9090: 1})
        assert client.connects == 2
        assert len(client.cache) == 2
        assert client.dropped == 0
    finally:
        client.stop()
