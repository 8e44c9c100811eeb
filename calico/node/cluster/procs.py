"""The cluster's own processes (etcd, every ``calico node run``, demo servers), found by a mark.

Every process ``up`` starts inherits ``CALICO_CLUSTER_ROOT=<root>`` (``calico node run`` passes
it on to its services), so ``down`` ends everything of one cluster, and only that, even when
the processes were re-parented or the ``up`` process is long gone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from calico.node.run import procs
from calico.node.run.environ import inherited

MARK_ENV = "CALICO_CLUSTER_ROOT"


def child_env(root: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without node-owned variables, plus the cluster's mark."""
    bin_dir = str(Path(sys.executable).parent)
    env = inherited(os.environ)
    path = env.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    if bin_dir not in path.split(":"):
        env["PATH"] = f"{bin_dir}:{path}"
    env[MARK_ENV] = root
    env.update(extra or {})
    return env


def spawn_in(
    netns: str, argv: Sequence[str], root: str, output: Path, extra: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` inside ``netns`` in its own session (Ctrl-C of ``up`` does not reach
    it), output appended to ``output``."""
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "ab") as out:
        return subprocess.Popen(
            ["ip", "netns", "exec", netns, *argv],
            env=child_env(root, extra),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd="/",
        )


def marked(root: str) -> list[int]:
    return procs.marked_pids(root, marker=MARK_ENV)


def end_marked(root: str, grace: float = 5.0) -> int:
    """TERM, then KILL after ``grace`` seconds, every process of the cluster; how many."""
    found = len(marked(root))
    procs.kill_leftovers(root, grace=grace, marker=MARK_ENV)
    return found
