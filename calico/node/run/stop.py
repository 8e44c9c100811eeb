"""``calico node stop``: end a running node from another process, via its pid file.

The ``run`` process does the orderly shutdown itself (it owns runsvdir); ``stop`` sends it
SIGTERM and waits. If that process is gone but some of its children are not (it was killed),
``stop`` finds them by the node's mark and ends them, so nothing is ever left behind.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from calico.node.errors import NodeError
from calico.node.run import cleanup, procs
from calico.node.run.layout import (
    Layout,
    load_settings,
    pid_alive,
    read_pid,
    remove_stale_socket,
)

STOP_TIMEOUT = 45.0


def _is_node_run(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    return b"node" in argv and b"run" in argv


def stop_node(layout: Layout, with_cleanup: bool, say: Callable[[str], None]) -> None:
    settings = load_settings(layout)
    pid = read_pid(layout)
    stopped = False
    if pid is not None and _is_node_run(pid):
        say(f"Stopping the Calico node (pid {pid})...")
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while pid_alive(pid):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.1)
        stopped = True
    leftovers = procs.marked_pids(layout.state_dir)
    if leftovers:
        say(f"Ending {len(leftovers)} leftover process(es) of this node.")
        procs.kill_leftovers(layout.state_dir, grace=12.0)
        if procs.marked_pids(layout.state_dir):
            raise NodeError("some of the node's processes could not be stopped")
    remove_stale_socket(layout.cni_daemon_socket)
    layout.pid_file.unlink(missing_ok=True)
    if stopped or leftovers:
        tail = "" if with_cleanup else "; the dataplane stays programmed, workloads keep working"
        say(f"Calico node stopped{tail}.")
    else:
        say("Calico node is not running.")
    if with_cleanup:
        cleanup.cleanup(settings, layout, say)
        say("Cleanup done.")
