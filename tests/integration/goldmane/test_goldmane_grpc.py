"""Goldmane over gRPC on loopback: push flows as Felix does, read them back every way."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest
import requests
from guardian_peer import make_cert

from calico.proto.goldmane import api_pb2 as pb
from calico.proto.goldmane import api_pb2_grpc as pb_grpc

if TYPE_CHECKING:  # type only: ``conftest`` is ambiguous when several test dirs are collected
    from conftest import GoldmaneProcess


def hit(name: str, action: int, rule: int, tier: str = "default") -> pb.PolicyHit:
    return pb.PolicyHit(
        kind=pb.CalicoNetworkPolicy,
        namespace="demo",
        name=name,
        tier=tier,
        action=action,
        rule_index=rule,
    )


def make_flow(port: int, action: int, policy: pb.PolicyHit, packets: int = 3) -> pb.Flow:
    now = int(time.time())
    return pb.Flow(
        Key=pb.FlowKey(
            source_name="client-*",
            source_namespace="demo",
            source_type=pb.WorkloadEndpoint,
            dest_name="server-*",
            dest_namespace="demo",
            dest_type=pb.WorkloadEndpoint,
            dest_port=port,
            proto="tcp",
            reporter=pb.Dst,
            action=action,
            policies=pb.PolicyTrace(enforced_policies=[policy]),
        ),
        start_time=now,
        end_time=now + 1,
        source_labels=["app=client", "env=demo"],
        dest_labels=["app=server"],
        packets_in=packets,
        packets_out=2 * packets,
        bytes_in=100 * packets,
        bytes_out=200 * packets,
        num_connections_started=1,
        num_connections_live=1,
    )


def allowed() -> pb.Flow:
    # Built per test: start times are "now", and the server drops flows older than its ring.
    return make_flow(80, pb.Allow, hit("allow-http", pb.Allow, 0))


def denied() -> pb.Flow:
    return make_flow(81, pb.Deny, hit("deny-rest", pb.Deny, 1))


def push(channel: grpc.Channel, flows: list[pb.Flow]) -> int:
    """Send flows over one FlowCollector.Connect stream; returns the receipts counted."""
    stub = pb_grpc.FlowCollectorStub(channel)
    receipts = 0
    for _ in stub.Connect(iter([pb.FlowUpdate(flow=f) for f in flows]), timeout=10):
        receipts += 1
    return receipts


def list_flows(channel: grpc.Channel, **kw: object) -> pb.FlowListResult:
    return pb_grpc.FlowsStub(channel).List(pb.FlowListRequest(**kw), timeout=10)


def test_pushed_flows_come_back_from_list_with_filters_and_totals(channel: grpc.Channel) -> None:
    a = allowed()
    assert push(channel, [a, denied(), a]) == 3  # the resend is not counted twice
    res = list_flows(channel)
    assert res.meta.totalResults == 2 and res.meta.totalPages == 1
    by_port = {r.flow.Key.dest_port: r.flow for r in res.flows}
    assert by_port[80].packets_in == 3 and by_port[80].bytes_out == 600
    assert list(by_port[80].source_labels) == ["app=client", "env=demo"]
    assert by_port[80].Key.policies.enforced_policies[0].name == "allow-http"
    assert by_port[80].end_time - by_port[80].start_time == 1  # one one-second bucket
    denied_flows = list_flows(channel, filter=pb.Filter(actions=[pb.Deny])).flows
    assert [
        (r.flow.Key.dest_port, r.flow.Key.policies.enforced_policies[0].rule_index)
        for r in denied_flows
    ] == [(81, 1)]
    page = list_flows(channel, page=1, page_size=1)
    assert (len(page.flows), page.meta.totalPages, page.meta.totalResults) == (1, 2, 2)
    ids = {r.id for r in res.flows}
    assert len(ids) == 2 and page.flows[0].id in ids


def test_bad_requests_are_invalid_argument_with_the_reason(channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as err:
        list_flows(channel, start_time_gte=100, start_time_lt=50)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == "startTimeGt (100) must be less than startTimeLt (50)"
    with pytest.raises(grpc.RpcError) as err:
        pb_grpc.FlowsStub(channel).FilterHints(pb.FilterHintsRequest(), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unsupported filter type 'FilterTypeUnspecified'" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        next(
            pb_grpc.FlowsStub(channel).Stream(
                pb.FlowStreamRequest(aggregation_interval=30), timeout=10
            )
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_filter_hints_and_statistics(channel: grpc.Channel) -> None:
    push(channel, [allowed(), denied()])
    stub = pb_grpc.FlowsStub(channel)
    hints = stub.FilterHints(pb.FilterHintsRequest(type=pb.FilterTypePolicyName), timeout=10)
    assert [h.value for h in hints.hints] == ["allow-http", "deny-rest"]
    assert hints.meta.totalResults == 2
    stats = list(
        pb_grpc.StatisticsStub(channel).List(
            pb.StatisticsRequest(group_by=pb.PolicyRule, type=pb.PacketCount), timeout=10
        )
    )
    got = {
        (s.policy.name, s.policy.rule_index, s.direction): (list(s.allowed_in), list(s.denied_in))
        for s in stats
    }
    assert got == {
        ("allow-http", 0, pb.Ingress): ([3], [0]),
        ("deny-rest", 1, pb.Ingress): ([0], [3]),
    }


def test_stream_backfills_then_follows_rollovers(channel: grpc.Channel) -> None:
    push(channel, [denied()])
    stream = pb_grpc.FlowsStub(channel).Stream(
        pb.FlowStreamRequest(start_time_gte=-60, filter=pb.Filter(actions=[pb.Deny])), timeout=20
    )
    first = next(stream)  # the bucket completes ~2 one-second rollovers later
    assert first.flow.Key.dest_port == 81 and first.flow.packets_in == 3
    push(channel, [make_flow(81, pb.Deny, hit("deny-rest", pb.Deny, 1), packets=7)])
    push(
        channel, [make_flow(80, pb.Allow, hit("allow-http", pb.Allow, 0), packets=9)]
    )  # filtered out
    second = next(stream)
    assert (second.id, second.flow.packets_in) == (first.id, 7)
    stream.cancel()


def test_health_endpoints_report_ready(goldmane: GoldmaneProcess) -> None:
    port = goldmane.health_port
    goldmane.port  # noqa: B018 - serving
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        r = requests.get(f"http://127.0.0.1:{port}/readiness", timeout=5)
        if r.status_code in (200, 204):
            break
        time.sleep(0.1)
    assert r.status_code in (200, 204)
    assert requests.get(f"http://127.0.0.1:{port}/liveness", timeout=5).status_code in (200, 204)


def test_sigterm_exits_zero(goldmane: GoldmaneProcess) -> None:
    goldmane.port  # noqa: B018
    assert goldmane.stop() == 0
    assert "Received shutdown signal" in goldmane.log()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PORT": "http"}, "Error: PORT: invalid integer 'http'"),
        ({"AGGREGATION_WINDOW": "15"}, "Error: AGGREGATION_WINDOW: "),
        (
            {"AGGREGATION_WINDOW": "1500ms"},
            "Error: AGGREGATION_WINDOW: must be a whole number of seconds",
        ),
        (
            {"SERVER_CERT_PATH": "/x"},
            "Error: SERVER_CERT_PATH and SERVER_KEY_PATH must be set together",
        ),
        ({"PUSH_URL": "ftp://x"}, "Error: PUSH_URL: expected an http:// or https:// URL"),
        ({"PROMETHEUS_PORT": "70000"}, "Error: PROMETHEUS_PORT: port 70000 out of range"),
        (
            {"EMITTER_AGGREGATION_WINDOW": "10s"},
            "Error: EMITTER_AGGREGATION_WINDOW: must be at least AGGREGATION_WINDOW (15s)",
        ),
        ({"HEALTH_ENABLED": "yes"}, "Error: HEALTH_ENABLED: invalid boolean 'yes'"),
        ({"LOG_LEVEL": "chatty"}, "Error: LOG_LEVEL: unknown level 'chatty'"),
    ],
)
def test_bad_config_is_one_error_line_and_exit_1(
    start_goldmane: Callable[[dict[str, str]], GoldmaneProcess], env: dict[str, str], message: str
) -> None:
    p = start_goldmane(env)
    assert p.proc.wait(30) == 1
    assert message in p.log() and "Traceback" not in p.log()


def test_mtls_requires_a_client_certificate_from_the_ca(
    start_goldmane: Callable[[dict[str, str]], GoldmaneProcess], tmp_path: Path
) -> None:
    ca = make_cert("goldmane-ca", ca=True)
    server = make_cert("goldmane", dns=("goldmane.test",), issuer=ca)
    client = make_cert("felix", issuer=ca)
    stranger = make_cert("stranger", issuer=make_cert("other-ca", ca=True))
    ca_crt, _ = ca.write(tmp_path, "ca")
    srv_crt, srv_key = server.write(tmp_path, "server")
    p = start_goldmane(
        {"SERVER_CERT_PATH": srv_crt, "SERVER_KEY_PATH": srv_key, "CA_CERT_PATH": ca_crt}
    )
    target = f"127.0.0.1:{p.port}"
    opts = [("grpc.ssl_target_name_override", "goldmane.test")]

    def channel_with(cert: object | None) -> grpc.Channel:
        creds = grpc.ssl_channel_credentials(
            root_certificates=ca.cert,
            private_key=cert.key if cert else None,  # type: ignore[attr-defined]
            certificate_chain=cert.cert if cert else None,  # type: ignore[attr-defined]
        )
        return grpc.secure_channel(target, creds, options=opts)

    with channel_with(client) as ch:
        assert push(ch, [allowed()]) == 1
        assert list_flows(ch).meta.totalResults == 1
    for cert in (None, stranger):
        with channel_with(cert) as ch, pytest.raises(grpc.RpcError) as err:
            list_flows(ch)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    with grpc.insecure_channel(target) as ch, pytest.raises(grpc.RpcError):
        list_flows(ch)


def test_the_101st_stream_is_resource_exhausted(channel: grpc.Channel) -> None:
    stub = pb_grpc.FlowsStub(channel)
    push(channel, [denied()])
    # A backfilled flow proves each stream is registered before the next is opened.
    streams = [
        stub.Stream(pb.FlowStreamRequest(start_time_gte=-60), timeout=60) for _ in range(100)
    ]
    try:
        for s in streams:
            next(s)
        with pytest.raises(grpc.RpcError) as err:
            next(stub.Stream(pb.FlowStreamRequest(), timeout=10))
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert err.value.details() == "too many streams (maximum 100)"
        streams.pop().cancel()
        # A freed slot is usable again (the server sees the cancel asynchronously).
        deadline = time.monotonic() + 10
        while True:
            again = stub.Stream(pb.FlowStreamRequest(start_time_gte=-60), timeout=10)
            try:
                assert next(again).flow.Key.dest_port == 81
                break
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert time.monotonic() < deadline, "the cancelled stream's slot was never freed"
                time.sleep(0.05)
        again.cancel()
    finally:
        for s in streams:
            s.cancel()
