"""End-to-end tests of calico.cmdwrapper.wrap_self with real outer/inner processes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).resolve().parent / "programs"
WRAPPED = PROGRAMS / "wrapped.py"
LOG = "calico.cmdwrapper INFO "

Spawn = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    """Start wrapped.py in its own process group; kill the group at teardown."""
    procs: list[subprocess.Popen[str]] = []

    def start(
        mode: str, *args: str, module: bool = False, env: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        full_env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO), str(PROGRAMS)]),
            "WRAPPED_STATE": str(tmp_path / "state"),
            "WRAPPED_MODE": mode,
            **(env or {}),
        }
        cmd = [sys.executable, *(["-m", "wrapped"] if module else [str(WRAPPED)]), *args]
        proc = subprocess.Popen(
            cmd,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


def state_lines(tmp_path: Path) -> list[str]:
    path = tmp_path / "state"
    return path.read_text().splitlines() if path.exists() else []


def wait_for_line(tmp_path: Path, line: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while line not in state_lines(tmp_path):
        assert time.monotonic() < deadline, f"timed out waiting for {line!r}"
        time.sleep(0.02)


def log_lines(stderr: str) -> list[str]:
    return [ln[len(LOG) :] for ln in stderr.splitlines() if ln.startswith(LOG)]


@pytest.mark.parametrize("module", [False, True], ids=["script", "python-m"])
def test_restarts_on_129_then_exits_0(spawn: Spawn, tmp_path: Path, module: bool) -> None:
    proc = spawn("restart", "a", "b c", module=module, env={"TEST_WRAP_INNER": "0"})
    _, err = proc.communicate(timeout=20)

    assert proc.returncode == 0, err
    prog = str(WRAPPED)
    assert log_lines(err) == [
        f"Starting {prog} a 'b c'",
        f"Received exit status 129, restarting {prog}",
        f"Starting {prog} a 'b c'",
        f"Received exit status 129, restarting {prog}",
        f"Starting {prog} a 'b c'",
        f"Received exit status 0 for {prog}",
    ]
    runs = state_lines(tmp_path)
    assert len(runs) == 3
    for run in runs:
        # Inherited TEST_WRAP_INNER=0 is replaced by 1; arguments survive intact.
        assert run.startswith("run TEST_WRAP_INNER=1 pid=")
        assert run.endswith("argv=['a', 'b c']")
    assert len({run.split()[2] for run in runs}) == 3, "each run is a fresh process"


def test_forwards_sigterm_and_exits_with_child_code(spawn: Spawn, tmp_path: Path) -> None:
    proc = spawn("term", env={"WRAPPED_CODE": "7"})
    wait_for_line(tmp_path, "ready")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=10)

    assert proc.returncode == 7, err
    assert f"got signal {int(signal.SIGTERM)}" in state_lines(tmp_path)
    assert log_lines(err)[-1] == f"Received exit status 7 for {WRAPPED}"


def test_sigterm_stops_restarts_even_if_child_asks_for_one(spawn: Spawn, tmp_path: Path) -> None:
    # The child answers SIGTERM with 129; after a stop signal the outer must not
    # restart, and must not exit 129 either (that would make runit restart it).
    proc = spawn("term", env={"WRAPPED_CODE": "129"})
    wait_for_line(tmp_path, "ready")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=10)

    assert proc.returncode == 128 + signal.SIGTERM, err
    assert sum(ln.startswith("run ") for ln in state_lines(tmp_path)) == 1
    assert log_lines(err)[-1] == f"Not restarting {WRAPPED}: SIGTERM received"


def test_sigterm_during_restart_loop_stops_it(spawn: Spawn, tmp_path: Path) -> None:
    # A child that keeps exiting 129: SIGTERM lands either on a child (which
    # dies of it) or in the gap between children; both must end with 143.
    proc = spawn("exit", env={"WRAPPED_CODE": "129"})
    deadline = time.monotonic() + 10
    while len(state_lines(tmp_path)) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=10)

    assert proc.returncode == 128 + signal.SIGTERM, err


def test_propagates_exit_code(spawn: Spawn) -> None:
    proc = spawn("exit", env={"WRAPPED_CODE": "3"})
    _, err = proc.communicate(timeout=10)

    assert proc.returncode == 3, err
    assert log_lines(err)[-1] == f"Received exit status 3 for {WRAPPED}"


def test_signal_killed_child_gives_128_plus_signal(spawn: Spawn) -> None:
    proc = spawn("selfkill")
    _, err = proc.communicate(timeout=10)

    assert proc.returncode == 128 + signal.SIGKILL, err
    assert log_lines(err)[-1] == f"Received exit status 137 for {WRAPPED}"


def _alive(pid: int) -> bool:
    """True if pid exists and is not a zombie (an unreaped orphan counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_inner_dies_with_outer(spawn: Spawn, tmp_path: Path) -> None:
    proc = spawn("sleep")
    wait_for_line(tmp_path, "ready")
    inner_pid = int(state_lines(tmp_path)[0].split("pid=")[1].split()[0])
    assert _alive(inner_pid)

    proc.kill()  # SIGKILL: the outer cannot forward anything
    proc.communicate(timeout=10)
    deadline = time.monotonic() + 5
    while _alive(inner_pid):
        assert time.monotonic() < deadline, "inner survived its outer process"
        time.sleep(0.02)
