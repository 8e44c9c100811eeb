"""``up`` and ``down``: build a cluster from its spec, and remove every trace of it.

``up`` saves the spec first, so ``down`` works after any failure, then: namespaces and bridge,
etcd (for the etcdv3 datastore), the cluster's calicoctl.cfg and IP pools, Typha (``--typha``),
the first node
(which initialises the cluster), the other nodes in parallel. ``down`` works from the saved spec
and the names alone: it stops every node (``calico node stop``), ends every process inside the
cluster's namespaces and every process carrying the cluster's mark (etcd, demo servers,
leftovers), deletes every ``<name>-*`` namespace (and with them every link, route, neighbour,
FDB entry and nftables table the nodes programmed) and removes the root directory.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from calico.node.cluster import ctl, etcd, fabric, nodes, procs, typha
from calico.node.cluster.spec import ClusterSpec, NodeSpec, load, save
from calico.node.errors import NodeError


def pool_vxlan_mode(backend: str, requested: str | None) -> str:
    """The pools' vxlanMode: no-encap for BIRD (it routes the blocks), VXLAN otherwise."""
    if requested is None:
        return "Never" if backend == "bird" else "Always"
    if backend == "bird" and requested != "Never":
        raise NodeError(
            f"--networking-backend bird routes the pools over BGP without encapsulation; "
            f"--vxlan-mode {requested} needs --networking-backend vxlan"
        )
    return requested


def up(
    spec: ClusterSpec,
    say: Callable[[str], None],
    backend: str = "vxlan",
    vxlan_mode: str = "Always",
    ready_timeout: float = nodes.READY_TIMEOUT,
) -> None:
    prepare(spec, say, vxlan_mode)
    start_nodes(spec, list(spec.nodes), say, backend, ready_timeout)


def prepare(spec: ClusterSpec, say: Callable[[str], None], vxlan_mode: str = "Always") -> None:
    """Everything but the nodes: namespaces, bridge, datastore, calicoctl.cfg, IP pools."""
    taken = fabric.cluster_netns(spec.name)
    if taken:
        raise NodeError(
            f"cluster {spec.name} already has namespaces ({', '.join(taken[:3])}...); "
            "take it down first"
        )
    save(spec)
    say(f"Cluster {spec.name}: {len(spec.nodes)} nodes, files under {spec.root}")
    fabric.create(spec, say)
    if spec.datastore == "etcdv3":
        pid = etcd.start(spec)
        say(f"   etcd (pid {pid}) at {spec.etcd_endpoint} in {spec.lan_netns}")
    else:
        say(f"   local datastore {spec.local_datastore} (opened by every namespace)")
    ctl.write_config(spec)
    ctl.calicoctl(spec, "apply", "-f", "-", stdin=ctl.pools_yaml(spec, vxlan_mode))
    say(f"   IP pools {spec.ipv4_pool} and {spec.ipv6_pool} (vxlanMode {vxlan_mode})")
    if spec.typha:
        pid = typha.start(spec)
        say(f"   Typha (pid {pid}) at {typha.address(spec)} in {spec.lan_netns}")


def start_nodes(
    spec: ClusterSpec,
    which: list[NodeSpec],
    say: Callable[[str], None],
    backend: str = "vxlan",
    ready_timeout: float = nodes.READY_TIMEOUT,
) -> None:
    """The first node alone (it initialises the datastore), then the rest together."""
    for batch in (which[:1], which[1:]):
        if not batch:
            continue
        started = {n.name: nodes.start(spec, n, backend) for n in batch}
        nodes.wait_ready(started, batch, ready_timeout)
        for n in batch:
            say(f"   {n.name} ready (logs {n.log_dir}/<service>/current)")


def down(root: str | Path, name: str, say: Callable[[str], None]) -> None:
    spec = load(root)
    if spec is not None:
        name = spec.name
        with ThreadPoolExecutor(max_workers=max(1, len(spec.nodes))) as pool:
            results = list(pool.map(nodes.stop, spec.nodes))
        for node, result in zip(spec.nodes, results, strict=True):
            say(f"   {node.name}: {result}")
    names = fabric.cluster_netns(name)
    killed = fabric.kill_netns_processes(names)
    ended = procs.end_marked(str(Path(root).absolute()))
    say(f"   ended {killed + ended} remaining process(es) (pods' servers, etcd, leftovers)")
    fabric.delete_all(names)
    say(f"   deleted {len(names)} network namespace(s) {name}-*")
    existed = Path(root).exists()
    shutil.rmtree(root, ignore_errors=True)
    if existed:
        say(f"   removed {root}")
    if spec is None and not names and not existed:
        say(f"No cluster {name} at {root}.")
