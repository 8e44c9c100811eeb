"""A real ``calico component goldmane`` process and gRPC clients generated from the proto."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest


class GoldmaneProcess:
    def __init__(self, calico_bin: str, env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [calico_bin, "component", "goldmane"],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_log(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.log())
            if m:
                return m
            assert self.proc.poll() is None, f"goldmane exited early:\n{self.log()}"
            time.sleep(0.05)
        raise AssertionError(f"{pattern!r} not logged within {timeout}s:\n{self.log()}")

    @property
    def port(self) -> int:
        return int(self.wait_log(r"gRPC server listening on port (\d+)").group(1))

    @property
    def health_port(self) -> int:
        return int(self.wait_log(r"Health endpoint listening host=\S* port=(\d+)").group(1))

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


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
