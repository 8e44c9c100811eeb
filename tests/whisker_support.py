"""Real goldmane and whisker-backend processes, and flows fed to Goldmane as Felix sends them.

Shared by the whisker-backend integration tests and the browser e2e test (import as
``from whisker_support import ...``; ``tests/conftest.py`` puts ``tests/`` on the path).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from component_process import ComponentProcess

from calico.proto.goldmane import api_pb2 as pb
from calico.proto.goldmane import api_pb2_grpc as pb_grpc


class GoldmaneProc(ComponentProcess):
    @property
    def port(self) -> int:
        return int(self.wait_log(r"gRPC server listening on port (\d+)").group(1))


class WhiskerProc(ComponentProcess):
    @property
    def url(self) -> str:
        return self.wait_log(r"whisker-backend listening on (\S+) ").group(1)


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PORT", "HOST", "HEALTH_PORT")}
    env.update(extra)
    return env


@pytest.fixture
def start_goldmane(calico_bin: str, tmp_path: Path) -> Iterator[Callable[..., GoldmaneProc]]:
    procs: list[GoldmaneProc] = []

    def start(extra: dict[str, str] | None = None) -> GoldmaneProc:
        env = _env({"PORT": "0", "HEALTH_PORT": "0", "HEALTH_HOST": "127.0.0.1"})
        env.update({"AGGREGATION_WINDOW": "1s", **(extra or {})})
        p = GoldmaneProc(calico_bin, "goldmane", env, tmp_path / f"goldmane-{len(procs)}.log")
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.stop()


@pytest.fixture
def start_whisker(calico_bin: str, tmp_path: Path) -> Iterator[Callable[..., WhiskerProc]]:
    procs: list[WhiskerProc] = []

    def start(goldmane_host: str, extra: dict[str, str] | None = None) -> WhiskerProc:
        env = _env({"PORT": "0", "GOLDMANE_HOST": goldmane_host, **(extra or {})})
        p = WhiskerProc(calico_bin, "whisker-backend", env, tmp_path / f"whisker-{len(procs)}.log")
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.stop()


def hit(name: str, action: int, rule: int, kind: int = pb.CalicoNetworkPolicy) -> pb.PolicyHit:
    return pb.PolicyHit(
        kind=kind, namespace="demo", name=name, tier="default", action=action, rule_index=rule
    )


def make_flow(
    port: int,
    action: int,
    enforced: list[pb.PolicyHit],
    pending: list[pb.PolicyHit] | None = None,
    source: str = "client-*",
    dest: str = "server-*",
) -> pb.Flow:
    now = int(time.time())
    return pb.Flow(
        Key=pb.FlowKey(
            source_name=source,
            source_namespace="demo",
            source_type=pb.WorkloadEndpoint,
            dest_name=dest,
            dest_namespace="demo",
            dest_type=pb.WorkloadEndpoint,
            dest_port=port,
            proto="tcp",
            reporter=pb.Dst,
            action=action,
            policies=pb.PolicyTrace(enforced_policies=enforced, pending_policies=pending or []),
        ),
        start_time=now,
        end_time=now + 1,
        source_labels=["app=client", "env=demo"],
        dest_labels=["app=server"],
        packets_in=3,
        packets_out=6,
        bytes_in=300,
        bytes_out=600,
        num_connections_started=1,
    )


def allowed_flow() -> pb.Flow:
    return make_flow(
        80,
        pb.Allow,
        [hit("allow-http", pb.Allow, 0)],
        pending=[hit("staged-lockdown", pb.Deny, 2, kind=pb.StagedNetworkPolicy)],
    )


def denied_flow() -> pb.Flow:
    end_of_tier = pb.PolicyHit(
        kind=pb.EndOfTier,
        tier="default",
        action=pb.Deny,
        policy_index=1,
        rule_index=-1,
        trigger=hit("allow-http", pb.ActionUnspecified, -1),
    )
    return make_flow(81, pb.Deny, [end_of_tier])


def push(goldmane_port: int, flows: list[pb.Flow]) -> int:
    """Send flows over one FlowCollector.Connect stream, as Felix does; the receipts counted."""
    with grpc.insecure_channel(f"127.0.0.1:{goldmane_port}") as ch:
        stub = pb_grpc.FlowCollectorStub(ch)
        updates = iter([pb.FlowUpdate(flow=f) for f in flows])
        return sum(1 for _ in stub.Connect(updates, timeout=10))
