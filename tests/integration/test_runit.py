"""Real runit (runsv/sv/svlogd) supervising services that exit 129."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).resolve().parent / "programs"
NODE_FS = Path(__file__).resolve().parents[2] / "node" / "filesystem"

pytestmark = pytest.mark.skipif(
    shutil.which("runsv") is None or shutil.which("sv") is None,
    reason="runit (runsv, sv) is not installed",
)

StartRunsv = Callable[[Path, dict[str, str]], subprocess.Popen[bytes]]


@pytest.fixture
def runsv() -> Iterator[StartRunsv]:
    """Start runsv in its own session; stop it with `sv exit`, then kill leftovers."""
    started: list[tuple[Path, subprocess.Popen[bytes]]] = []

    def start(service: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            ["runsv", str(service)],
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        started.append((service, proc))
        return proc

    yield start
    for service, proc in started:
        if proc.poll() is None:
            subprocess.run(["sv", "exit", str(service)], capture_output=True, timeout=10)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        # Whatever is left in the session: runsv, run, log/run, svlogd.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def count_runs(path: Path) -> int:
    return path.read_text().count("run ") if path.exists() else 0


def test_runsv_restarts_service_exiting_129(tmp_path: Path, runsv: StartRunsv) -> None:
    service = tmp_path / "svc"
    service.mkdir()
    run = service / "run"
    run.write_text(f"#!/bin/sh\nexec {PROGRAMS / 'exit129.sh'}\n")
    run.chmod(0o755)
    state = tmp_path / "runs"

    proc = runsv(service, {"EXIT129_STATE": str(state)})
    wait_until(lambda: count_runs(state) >= 2, 10, "a restart after exit 129")

    status = subprocess.run(["sv", "status", str(service)], capture_output=True, text=True)
    assert status.returncode == 0, status.stderr
    assert status.stdout.split(":")[0] in ("run", "down", "finish"), status.stdout
    assert str(service) in status.stdout

    subprocess.run(["sv", "exit", str(service)], check=True, capture_output=True, timeout=10)
    proc.wait(timeout=10)


def test_node_felix_service_with_log_under_runsv(tmp_path: Path, runsv: StartRunsv) -> None:
    # The image's felix service (run + log/run) with a fake `calico` exiting 129.
    service = tmp_path / "felix"
    shutil.copytree(NODE_FS / "etc/service/available/felix", service)
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    (fakebin / "calico").symlink_to(PROGRAMS / "fake_calico.sh")
    logdir = tmp_path / "log"

    proc = runsv(
        service,
        {
            "PATH": f"{fakebin}{os.pathsep}{os.environ['PATH']}",
            "FAKE_CALICO_DUMP": str(tmp_path / "dump"),
            "FAKE_CALICO_RC": "129",
            "CALICO_LOG_DIR": str(logdir),
            "NODENAME": "node-a",
        },
    )
    current = logdir / "felix" / "current"

    def logged_runs() -> int:
        return (
            current.read_text().count("fake calico ran: component felix") if current.exists() else 0
        )

    wait_until(lambda: logged_runs() >= 2, 10, "two felix runs in the svlogd log")
    text = current.read_text()
    assert "fake calico stderr" in text  # stderr is merged into the log
    assert (logdir / "felix" / "config").read_text() == "s10000000\nn5\n"
    assert "FELIX_FELIXHOSTNAME=node-a" in (tmp_path / "dump").read_text().splitlines()

    subprocess.run(["sv", "exit", str(service)], check=True, capture_output=True, timeout=10)
    proc.wait(timeout=10)
