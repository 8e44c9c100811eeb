"""Finding and ending the processes one node started, without trusting the process tree.

runsvdir ``-P`` puts every runsv in its own session, and a log service's ``svlogd`` outlives
its ``tee``, so neither a process group nor the parent chain reaches everything. Instead every
supervised process inherits ``CALICO_NODE_RUN_STATE=<state dir>`` and is found by that mark in
``/proc/<pid>/environ``. The ``run`` process also becomes a child subreaper, so orphans are
re-parented to it and reaped rather than left as zombies of PID 1.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from pathlib import Path

from calico.node.run.layout import MARKER_ENV, pid_alive
from calico.reaper import reap_children

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Best effort: without it orphans go to PID 1, which reaps them too."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def marked_pids(state_dir: str | os.PathLike[str], marker: str = MARKER_ENV) -> list[int]:
    """Live processes carrying this node's mark (``marker=<state_dir>``; never the caller)."""
    want = f"{marker}={os.fspath(state_dir)}".encode()
    me = os.getpid()
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if want in environ.split(b"\0") and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return sorted(found)


def signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def wait_gone(
    state_dir: str | os.PathLike[str],
    timeout: float,
    reap: bool = False,
    marker: str = MARKER_ENV,
) -> list[int]:
    """Wait until no marked process is left; returns those still alive at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        if reap:
            reap_children()
        left = marked_pids(state_dir, marker)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def kill_leftovers(
    state_dir: str | os.PathLike[str], grace: float, reap: bool = False, marker: str = MARKER_ENV
) -> None:
    """TERM whatever is still marked, then KILL what survives ``grace`` seconds."""
    left = marked_pids(state_dir, marker)
    if not left:
        return
    signal_all(left, signal.SIGTERM)
    left = wait_gone(state_dir, grace, reap, marker)
    if left:
        signal_all(left, signal.SIGKILL)
        wait_gone(state_dir, 5.0, reap, marker)
