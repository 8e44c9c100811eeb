"""The one child reaper (CNI daemon, ``calico node run``).

Each scenario runs in a forked child, so the reaper never collects a child of the test process
(a fixture's server, say).
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable

from calico.reaper import reap_children


def in_child(scenario: Callable[[], None]) -> None:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            scenario()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def fork_exiting(n: int, after: float = 0.0) -> list[int]:
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            time.sleep(after)
            os._exit(0)
        pids.append(pid)
    return pids


def test_reaps_every_exited_child() -> None:
    def scenario() -> None:
        pids = fork_exiting(3)
        deadline = time.monotonic() + 10
        reaped = 0
        while reaped < 3 and time.monotonic() < deadline:
            reaped += reap_children()
            time.sleep(0.01)
        assert reaped == 3
        for pid in pids:  # none left as a zombie
            assert not os.path.exists(f"/proc/{pid}")
        assert reap_children() == 0  # no children left: ChildProcessError is not raised

    in_child(scenario)


def test_does_not_wait_for_running_children() -> None:
    def scenario() -> None:
        (pid,) = fork_exiting(1, after=5)
        start = time.monotonic()
        assert reap_children() == 0
        assert time.monotonic() - start < 1
        os.kill(pid, 9)
        os.waitpid(pid, 0)

    in_child(scenario)
