"""Each node: the real ``calico node run`` inside its namespace, with its own flags and dirs.

Only the flags differ from a node on a real machine: ``--name``, ``--ip``/``--ip6`` (its eth0),
the cluster's datastore, and its own ``--state-dir``, ``--log-dir``, ``--cni-conf-dir`` and
``--cni-bin-dir`` under the cluster root (so its own runit tree, CNI files and per-node
state). The cluster's IP pools exist before any node starts, so ``NO_DEFAULT_POOLS=true``; with
the cluster's Typha, ``FELIX_TYPHAADDR`` points Felix at it.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from calico.node.cluster import procs
from calico.node.cluster.spec import ClusterSpec, NodeSpec
from calico.node.errors import NodeError
from calico.node.run.provision import calico_exe

READY_LINE = "Calico node is running."
READY_TIMEOUT = 120.0


def run_argv(spec: ClusterSpec, node: NodeSpec, backend: str = "vxlan") -> list[str]:
    return [
        *(calico_exe(), "node", "run"),
        *("--name", node.name, "--ip", node.ip, "--ip6", node.ip6),
        *("--networking-backend", backend),
        *spec.datastore_args(),
        *("--state-dir", str(node.state_dir), "--log-dir", str(node.log_dir)),
        *("--cni-conf-dir", str(node.cni_conf_dir), "--cni-bin-dir", str(node.cni_bin_dir)),
        # Goldmane and Whisker are cluster services upstream, not per node: none on the nodes.
        "--no-flow-logs",
    ]


def run_env(spec: ClusterSpec) -> dict[str, str]:
    """The node's extra environment; with Typha, ``FELIX_TYPHAADDR`` (node run passes it on)."""
    env = {"NO_DEFAULT_POOLS": "true"}
    if spec.typha:
        from calico.node.cluster.typha import address

        env["FELIX_TYPHAADDR"] = address(spec)
    return env


def start(spec: ClusterSpec, node: NodeSpec, backend: str = "vxlan") -> subprocess.Popen[bytes]:
    node.output_file.unlink(missing_ok=True)
    return procs.spawn_in(
        node.netns, run_argv(spec, node, backend), spec.root, node.output_file, run_env(spec)
    )


def output(node: NodeSpec) -> str:
    try:
        return node.output_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def wait_ready(
    started: dict[str, subprocess.Popen[bytes]], nodes: list[NodeSpec], timeout: float
) -> None:
    """Until every node printed its ready line; a node that exits first is an error."""
    deadline = time.monotonic() + timeout
    waiting = list(nodes)
    while waiting:
        for node in list(waiting):
            proc = started[node.name]
            if READY_LINE in output(node):
                waiting.remove(node)
            elif proc.poll() is not None:
                last = output(node).strip().splitlines()[-1:] or ["no output"]
                raise NodeError(
                    f"calico node run on {node.name} exited {proc.returncode}: {last[0]} "
                    f"(see {node.output_file})"
                )
        if waiting and time.monotonic() > deadline:
            names = ", ".join(n.name for n in waiting)
            raise NodeError(f"{names} not ready after {timeout:.0f}s (see {nodes[0].root})")
        time.sleep(0.3)


def stop(node: NodeSpec) -> str:
    """``calico node stop`` inside the node's namespace; returns its last line."""
    if not Path(node.state_dir).exists():
        return "not started"
    proc = subprocess.run(
        [
            *("ip", "netns", "exec", node.netns, calico_exe(), "node", "stop"),
            *("--state-dir", str(node.state_dir)),
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    return lines[-1] if lines else f"exit {proc.returncode}"
