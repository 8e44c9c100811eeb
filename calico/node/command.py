"""The ``calico component node`` click group."""

from __future__ import annotations

import logging
import os
from typing import Any

import click

from calico.durations import DurationError, parse_duration
from calico.logutils import configure_formatter
from calico.node.errors import NodeError

log = logging.getLogger(__name__)


def _version() -> str:
    from calico.buildinfo import build_info

    return build_info().version


class NodeGroup(click.Group):
    """A group whose commands' :class:`NodeError` becomes click's ``Error: <message>``, exit 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except NodeError as exc:
            raise click.ClickException(str(exc)) from None


@click.group("node", cls=NodeGroup)
def node_group() -> None:
    """Node agent lifecycle: provision, serve, probe."""


@node_group.command("startup")
def startup_command() -> None:
    """Provision this node in the datastore (Node, default pools, cluster defaults)."""
    from calico.node.startup import run_startup

    configure_formatter("startup")
    run_startup(dict(os.environ), _version())


@node_group.command("init")
@click.option(
    "--best-effort", is_flag=True, help="Carry on if the BPF filesystem cannot be mounted."
)
@click.option(
    "--bpffs",
    is_flag=True,
    envvar="FELIX_BPFENABLED",
    help="Mount the BPF filesystem at /sys/fs/bpf (default: only when FELIX_BPFENABLED=true).",
)
@click.option(
    "--state-dir",
    "state_dirs",
    multiple=True,
    help="Directories to create (default: /var/lib/calico and /var/run/calico).",
)
def init_command(best_effort: bool, bpffs: bool, state_dirs: tuple[str, ...]) -> None:
    """Prepare the host: state directories, and the BPF filesystem when requested."""
    from calico.node.nodeinit import STATE_DIRS, run_init

    configure_formatter("init")
    run_init(state_dirs or STATE_DIRS, bpffs, best_effort)


@node_group.command("node-services")
def node_services_command() -> None:
    """Run the long-lived node helpers (the address monitor) until SIGTERM/SIGINT."""
    from calico.node.background import node_services, run_services

    configure_formatter("node-services")
    run_services(node_services(dict(os.environ)))


@node_group.command("monitor-addresses")
def monitor_addresses_command() -> None:
    """Only the address monitor: re-detect every AUTODETECT_POLL_INTERVAL, update the Node."""
    from calico.node.background import monitor_addresses, run_services

    configure_formatter("monitor-addresses")
    run_services({"monitor-addresses": monitor_addresses(dict(os.environ))})


def _threshold(_ctx: click.Context, _param: click.Parameter, value: str) -> float:
    try:
        return parse_duration(value)
    except DurationError as exc:
        raise click.BadParameter(str(exc)) from None


@node_group.command("health")
@click.option("--felix-live", is_flag=True, help="Felix's liveness endpoint answers OK.")
@click.option("--felix-ready", is_flag=True, help="Felix's readiness endpoint answers OK.")
@click.option("--bird-ready", is_flag=True, help="BIRD's IPv4 BGP sessions are established.")
@click.option("--bird6-ready", is_flag=True, help="BIRD's IPv6 BGP sessions are established.")
@click.option("--bird-live", is_flag=True, help="BIRD (IPv4) and confd are running.")
@click.option("--bird6-live", is_flag=True, help="BIRD (IPv6) and confd are running.")
@click.option(
    "--threshold-time",
    default="30s",
    show_default=True,
    callback=_threshold,
    help="Request timeout, and how long after startup every BGP peer must be up.",
)
def health_command(
    felix_live: bool,
    felix_ready: bool,
    bird_ready: bool,
    bird6_ready: bool,
    bird_live: bool,
    bird6_live: bool,
    threshold_time: float,
) -> None:
    """Exit 0 when every requested check passes, else 1 with one line per failure."""
    from calico.node import health

    opts = health.HealthOptions(
        felix_live=felix_live,
        felix_ready=felix_ready,
        bird_ready=bird_ready,
        bird6_ready=bird6_ready,
        bird_live=bird_live,
        bird6_live=bird6_live,
        threshold=threshold_time,
    )
    if not opts.any():
        raise NodeError(health.NO_CHECKS)
    try:
        failures = health.run_checks(opts, dict(os.environ))
    except ValueError as exc:
        raise NodeError(str(exc)) from None
    for line in failures:
        click.echo(line, err=True)
    if failures:
        raise SystemExit(1)


@node_group.command("version")
def version_command() -> None:
    """Print the version."""
    click.echo(_version())


@node_group.command("allocate-tunnel-addrs")
@click.option(
    "--run-once", is_flag=True, help="One reconcile pass, then exit (node start-up, rc.local)."
)
def allocate_tunnel_addrs_command(run_once: bool) -> None:
    """Assign this node's VXLAN/IPIP tunnel addresses from IPAM and record them on the Node;
    release them when no pool wants them. Without --run-once, keeps doing so as pools change."""
    from calico.node.background import allocate_tunnel_addrs, run_services

    configure_formatter("allocate-tunnel-addrs")
    env = dict(os.environ)
    if run_once:
        from calico.node.datastore import datastore_config, open_client
        from calico.node.nodename import determine_node_name
        from calico.node.tunnel_addrs import reconcile

        client = open_client(datastore_config(env), env.get("WAIT_FOR_DATASTORE") == "true")
        try:
            reconcile(client, determine_node_name(env))
        finally:
            client.backend.close()
        return
    run_services({"allocate-tunnel-addrs": allocate_tunnel_addrs(env)})
