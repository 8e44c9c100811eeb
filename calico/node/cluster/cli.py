"""``calico node cluster up|down|status``: a multi-node cluster on this machine (flags only).

``make cluster`` runs ``up`` (three VXLAN nodes plus the cross-node demo) and ``make
cluster-down`` runs ``down``. The entry layer attaches this group under ``calico node``.
"""

from __future__ import annotations

import click

from calico.node.command import NodeGroup

DEFAULT_NAME = "calico-cluster"
DEFAULT_ROOT = "/var/run/calico-cluster"

ROOT_OPTION = click.option(
    "--root",
    default=DEFAULT_ROOT,
    show_default=True,
    help="Every file of the cluster (spec, etcd data, each node's dirs) lives here.",
)


@click.group("cluster", cls=NodeGroup)
def cluster_group() -> None:
    """N Calico nodes as network namespaces on one bridge, one datastore, on this machine."""


@cluster_group.command("up")
@click.option("--name", default=DEFAULT_NAME, show_default=True, help="Prefix of every name.")
@ROOT_OPTION
@click.option("--nodes", "count", type=click.IntRange(1, 50), default=3, show_default=True)
@click.option(
    "--datastore", type=click.Choice(["etcdv3", "local"]), default="etcdv3", show_default=True
)
@click.option(
    "--vxlan-mode",
    type=click.Choice(["Always", "CrossSubnet", "Never"]),
    default=None,
    help="The IP pools' vxlanMode (default: Never with --networking-backend bird, a no-encap "
    "pool whose routes BIRD exchanges; else Always).",
)
@click.option(
    "--other-subnet",
    type=int,
    multiple=True,
    default=(),
    help="Put node N on a second subnet behind the router (repeatable; for CrossSubnet).",
)
@click.option(
    "--networking-backend",
    type=click.Choice(["vxlan", "bird", "none"]),
    default="vxlan",
    show_default=True,
    help="Each node's calico node run --networking-backend (bird: a BGP full mesh).",
)
@click.option(
    "--typha", is_flag=True, help="One Typha in the lan namespace; every Felix syncs through it."
)
@click.option("--no-demo", is_flag=True, help="Only the cluster, no demo workloads.")
def up_command(
    name: str,
    root: str,
    count: int,
    datastore: str,
    vxlan_mode: str | None,
    other_subnet: tuple[int, ...],
    networking_backend: str,
    typha: bool,
    no_demo: bool,
) -> None:
    """Bring the cluster up (and run the demo across nodes); it stays up until 'down'."""
    import os

    from calico.node.cluster import ctl, demo, lifecycle, spec
    from calico.node.errors import NodeError

    if os.geteuid() != 0:
        raise NodeError("calico node cluster up must run as root (namespaces, nftables, routes)")
    vxlan_mode = lifecycle.pool_vxlan_mode(networking_backend, vxlan_mode)
    cluster = spec.build(name, root, count, datastore, other_subnet, typha=typha)
    try:
        lifecycle.up(cluster, click.echo, backend=networking_backend, vxlan_mode=vxlan_mode)
        if not no_demo:
            click.echo()
            cluster, result = demo.run(cluster, click.echo)
    except NodeError as exc:
        if spec.load(root) is None:
            raise  # nothing was made
        raise NodeError(
            f"{exc}; the cluster is partly up (logs under {cluster.root}): "
            f"'calico node cluster down --name {name} --root {root}' removes it"
        ) from None
    if not no_demo:
        click.echo()
        click.echo(click.style("Cluster demo checks passed.", fg="green", bold=True))
        click.echo(f"Try it:   ip netns exec {result.trusted.netns} curl {result.url}")
        click.echo(f"          ip netns exec {result.untrusted.netns} curl -m 2 {result.url}")
    click.echo(f"calicoctl: {' '.join(ctl.argv(cluster, 'get', 'nodes', '-o', 'wide'))}")
    click.echo(f"Take it down: calico node cluster down --root {cluster.root}  (make cluster-down)")


@cluster_group.command("down")
@click.option("--name", default=DEFAULT_NAME, show_default=True)
@ROOT_OPTION
def down_command(name: str, root: str) -> None:
    """Stop every node and remove every namespace, process and file of the cluster."""
    from calico.node.cluster import lifecycle

    click.echo(f"Taking cluster down ({root})...")
    lifecycle.down(root, name, click.echo)


@cluster_group.command("status")
@ROOT_OPTION
def status_command(root: str) -> None:
    """Each node's process and addresses, and the pods the demo made."""
    from calico.node.cluster import spec
    from calico.node.errors import NodeError
    from calico.node.run.layout import layout_for, read_pid

    cluster = spec.load(root)
    if cluster is None:
        raise NodeError(f"no cluster at {root}")
    healthy = True
    for node in cluster.nodes:
        pid = read_pid(layout_for(node.state_dir))
        healthy &= pid is not None
        state = f"running (pid {pid})" if pid else "NOT running"
        click.echo(f"{node.name:<8} {node.netns:<28} {node.ip:<18} {node.ip6:<22} {state}")
    for pod in cluster.pods:
        click.echo(f"pod sandbox {pod}")
    if not healthy:
        raise SystemExit(1)
