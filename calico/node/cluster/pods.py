"""Pods on a given node, made as that node's container runtime would make them.

The CNI plugin programs the namespace it runs in, so each ADD/DEL runs in a child process that
first moved itself (network only, ``setns``) into the node's namespace and then runs the node's
installed plugin with its conflist (:mod:`calico.node.run.workloads`). Sandboxes are named
``<cluster>-<pod>`` so ``down`` finds them.

    python -m calico.node.cluster.pods add|del NODE_NETNS STATE_DIR NAMESPACE POD SANDBOX
"""

from __future__ import annotations

import json
import subprocess
import sys

from calico.node.cluster.spec import ClusterSpec, NodeSpec
from calico.node.errors import NodeError
from calico.node.run import workloads as wl
from calico.node.run.layout import layout_for, load_settings

POD_TIMEOUT = 90.0


def _call(action: str, node: NodeSpec, namespace: str, pod: str, sandbox: str) -> str:
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "calico.node.cluster.pods", action),
            *(node.netns, str(node.state_dir), namespace, pod, sandbox),
        ],
        capture_output=True,
        text=True,
        timeout=POD_TIMEOUT,
        check=False,
    )
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise NodeError(f"{action} pod {namespace}/{pod} on {node.name}: {why}")
    return proc.stdout


def add_pod(spec: ClusterSpec, node: NodeSpec, namespace: str, pod: str) -> wl.Workload:
    """A new pod ``namespace/pod`` on ``node``; returns it with its addresses' first IP."""
    sandbox = spec.sandbox(pod)
    doc = json.loads(_call("add", node, namespace, pod, sandbox))
    return wl.Workload(**doc)


def delete_pod(node: NodeSpec, w: wl.Workload) -> None:
    _call("del", node, w.namespace, w.pod, w.netns)


def main(argv: list[str]) -> int:
    if len(argv) != 6 or argv[0] not in ("add", "del"):
        print(__doc__, file=sys.stderr)
        return 2
    action, node_netns, state_dir, namespace, pod, sandbox = argv
    try:
        wl.enter_netns(node_netns)
        settings = load_settings(layout_for(state_dir))
        if settings is None:
            raise wl.WorkloadError(f"no node has run from {state_dir}")
        w = wl.Workload(namespace, pod, sandbox, sandbox)
        if action == "add":
            print(json.dumps(wl.add_workload(settings, w).to_json()))
        else:
            error = wl.delete_workload(settings, w)
            if error:
                raise wl.WorkloadError(error)
    except (wl.WorkloadError, NodeError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
