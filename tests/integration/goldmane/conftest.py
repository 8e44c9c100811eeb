"""A real ``calico component goldmane`` process and gRPC clients generated from the proto."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from component_process import ComponentProcess


class GoldmaneProcess(ComponentProcess):
    def __init__(self, calico_bin: str, env: dict[str, str], log_path: Path) -> None:
        super().__init__(calico_bin, "goldmane", env, log_path)

    @property
    def port(self) -> int:
        return int(self.wait_log(r"gRPC server listening on port (\d+)").group(1))

    @property
    def health_port(self) -> int:
        return int(self.wait_log(r"Health endpoint listening host=\S* port=(\d+)").group(1))


@pytest.fixture
def start_goldmane(
    calico_bin: str, tmp_path: Path
) -> Iterator[Callable[[dict[str, str]], GoldmaneProcess]]:
    procs: list[GoldmaneProcess] = []

    def start(extra: dict[str, str]) -> GoldmaneProcess:
        env = {k: v for k, v in os.environ.items() if k not in ("PORT", "HEALTH_PORT")}
        env.update({"PORT": "0", "HEALTH_PORT": "0", "HEALTH_HOST": "127.0.0.1"})
        env.update(extra)
        p = GoldmaneProcess(calico_bin, env, tmp_path / f"goldmane-{len(procs)}.log")
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.stop()


@pytest.fixture
def goldmane(start_goldmane: Callable[[dict[str, str]], GoldmaneProcess]) -> GoldmaneProcess:
    """Plaintext, with one-second buckets so streams see rollovers quickly."""
    return start_goldmane({"AGGREGATION_WINDOW": "1s"})


@pytest.fixture
def channel(goldmane: GoldmaneProcess) -> Iterator[grpc.Channel]:
    ch = grpc.insecure_channel(f"127.0.0.1:{goldmane.port}")
    grpc.channel_ready_future(ch).result(timeout=10)
    yield ch
    ch.close()
