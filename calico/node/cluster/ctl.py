"""calicoctl against the cluster's datastore, from the lan namespace (where etcd listens).

The cluster writes its own CalicoAPIConfig (``<root>/calicoctl.cfg``) and always passes it
with ``-c``, so neither the host's /etc/calico/calicoctl.cfg nor the caller's environment
decides which datastore is meant.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from calico.node.cluster.spec import ClusterSpec, NodeSpec
from calico.node.errors import NodeError
from calico.node.run.layout import layout_for


def write_config(spec: ClusterSpec) -> None:
    if spec.datastore == "etcdv3":
        body = f"  datastoreType: etcdv3\n  etcdEndpoints: {json.dumps(spec.etcd_endpoint)}\n"
    else:
        path = json.dumps(str(spec.local_datastore))
        body = f"  datastoreType: local\n  localDatastorePath: {path}\n"
    spec.calicoctl_config.write_text(
        "apiVersion: projectcalico.org/v3\nkind: CalicoAPIConfig\nmetadata: {}\nspec:\n" + body,
        encoding="utf-8",
    )


def calicoctl_exe() -> str:
    return str(Path(sys.executable).parent / "calicoctl")


def argv(spec: ClusterSpec, *args: str) -> list[str]:
    """The full command line (handy to print for users)."""
    return [
        *("ip", "netns", "exec", spec.lan_netns, calicoctl_exe()),
        *args,
        *("-c", str(spec.calicoctl_config)),
    ]


def calicoctl(
    spec: ClusterSpec, *args: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        argv(spec, *args),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if check and proc.returncode != 0:
        raise NodeError(f"calicoctl {' '.join(args)}: {(proc.stderr or proc.stdout).strip()}")
    return proc


def node_status_argv(spec: ClusterSpec, node: NodeSpec) -> list[str]:
    """``calicoctl node status`` inside ``node``'s namespace, pointed at that node's own BIRD
    sockets and confd status file (each node keeps them under its state dir)."""
    layout = layout_for(node.state_dir)
    env = {
        "CALICO_BIRD_SOCKET": str(layout.bird_socket),
        "CALICO_BIRD6_SOCKET": str(layout.bird6_socket),
        "CALICO_CONFD_STATUS_FILE": str(layout.run_dir / "confd-status.json"),
    }
    return [
        *("ip", "netns", "exec", node.netns, "env"),
        *(f"{k}={v}" for k, v in env.items()),
        *(calicoctl_exe(), "node", "status"),
    ]


def node_status(spec: ClusterSpec, node: NodeSpec) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        node_status_argv(spec, node), capture_output=True, text=True, timeout=60, check=False
    )


def get_json(spec: ClusterSpec, *args: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(calicoctl(spec, "get", *args, "-o", "json").stdout)
    return doc


def pools_yaml(spec: ClusterSpec, vxlan_mode: str = "Always") -> str:
    """The cluster's two pools: IPv4 (NAT-outgoing, as upstream's default) and IPv6."""
    return f"""apiVersion: projectcalico.org/v3
kind: IPPool
metadata:
  name: cluster-ipv4
spec:
  cidr: {spec.ipv4_pool}
  blockSize: 26
  vxlanMode: {vxlan_mode}
  ipipMode: Never
  natOutgoing: true
  nodeSelector: all()
---
apiVersion: projectcalico.org/v3
kind: IPPool
metadata:
  name: cluster-ipv6
spec:
  cidr: {spec.ipv6_pool}
  blockSize: 122
  vxlanMode: {vxlan_mode}
  ipipMode: Never
  natOutgoing: false
  nodeSelector: all()
"""
