"""The ``calico node`` group (``run``, ``stop``, ``status``).

The entry layer (:mod:`calico.cli.root`) also serves it as ``calicoctl node``.

Only flag parsing lives here; each command's work is in its own module.
"""

from __future__ import annotations

import click

from calico.datastore.config import DEFAULT_LOCAL_PATH
from calico.node.command import NodeGroup
from calico.node.errors import NodeError
from calico.node.run import layout as lay

STATE_DIR_OPTION = click.option(
    "--state-dir",
    envvar=lay.STATE_DIR_ENV,
    default=lay.DEFAULT_STATE_DIR,
    show_default=True,
    help="The node's pid file, settings and runit service directory.",
)


@click.group("node", cls=NodeGroup)
def node_group() -> None:
    """A whole Calico node on this machine: run, stop, status."""


@node_group.command("run")
@click.option("--name", envvar="NODENAME", default="", help="Node name (default: hostname).")
@click.option(
    "--ip", envvar="IP", default="", help="IPv4 address[/prefix] or 'autodetect' (default)."
)
@click.option(
    "--ip-autodetection-method",
    envvar="IP_AUTODETECTION_METHOD",
    default="",
    help="first-found (default), interface=..., skip-interface=..., cidr=..., can-reach=...",
)
@click.option(
    "--ip6", envvar="IP6", default="", help="IPv6 address[/prefix], 'autodetect' or empty (none)."
)
@click.option(
    "--networking-backend",
    envvar="CALICO_NETWORKING_BACKEND",
    type=click.Choice(lay.NETWORKING_BACKENDS),
    default=lay.default_networking_backend,
    show_default="bird when BIRD is installed, else vxlan",
    help="bird: BGP (confd, bird, bird6 under runit); vxlan: tunnel addresses + VXLAN in "
    "Felix; none: policy only.",
)
@click.option(
    "--datastore",
    type=click.Choice(["local", "etcdv3"]),
    default="local",
    show_default=True,
    help="local: the embedded SQLite datastore; etcdv3: an etcd cluster.",
)
@click.option("--etcd-endpoints", envvar="ETCD_ENDPOINTS", default="", help="For etcdv3.")
@click.option(
    "--datastore-path",
    envvar="CALICO_DATASTORE_PATH",
    default=DEFAULT_LOCAL_PATH,
    show_default=True,
    help="The local datastore's file.",
)
@STATE_DIR_OPTION
@click.option("--log-dir", envvar="CALICO_LOG_DIR", default=lay.DEFAULT_LOG_DIR, show_default=True)
@click.option("--cni-conf-dir", default=lay.DEFAULT_CNI_CONF_DIR, show_default=True)
@click.option("--cni-bin-dir", default=lay.DEFAULT_CNI_BIN_DIR, show_default=True)
@click.option(
    "--felix-health-port",
    type=click.IntRange(1, 65535),
    default=lay.DEFAULT_HEALTH_PORT,
    show_default=True,
)
@click.option(
    "--goldmane-port",
    type=click.IntRange(1, 65535),
    default=lay.DEFAULT_GOLDMANE_PORT,
    show_default=True,
    help="Goldmane's gRPC port (flows from Felix, queries from whisker-backend).",
)
@click.option(
    "--whisker-port",
    type=click.IntRange(1, 65535),
    default=lay.DEFAULT_WHISKER_PORT,
    show_default=True,
    help="Whisker's UI and REST API, on 127.0.0.1.",
)
@click.option(
    "--ready-timeout",
    type=click.FloatRange(min=1),
    default=120.0,
    show_default=True,
    help="Seconds to wait for Felix to report ready before saying so.",
)
@click.option("--print-logs", is_flag=True, help="Also copy every service's log to stdout.")
def run_command(
    name: str,
    ip: str,
    ip_autodetection_method: str,
    ip6: str,
    networking_backend: str,
    datastore: str,
    etcd_endpoints: str,
    datastore_path: str,
    state_dir: str,
    log_dir: str,
    cni_conf_dir: str,
    cni_bin_dir: str,
    felix_health_port: int,
    goldmane_port: int,
    whisker_port: int,
    ready_timeout: float,
    print_logs: bool,
) -> None:
    """Provision this node, install the CNI plugin and supervise Felix and the node services
    under runit until Ctrl-C or 'calico node stop'."""
    import os

    from calico.bird_services import bird_installed
    from calico.node.run.runner import run_node

    if networking_backend == "bird" and not bird_installed():
        raise NodeError(
            "networking backend bird needs BIRD 1.x (bird and bird6 on PATH: apt-get install "
            "bird); or use --networking-backend vxlan or none"
        )
    if datastore == "etcdv3" and not etcd_endpoints:
        raise NodeError("--datastore etcdv3 needs --etcd-endpoints (e.g. http://127.0.0.1:2379)")
    layout = lay.layout_for(state_dir)
    settings = lay.NodeSettings(
        state_dir=str(layout.state_dir),
        log_dir=os.path.abspath(log_dir),
        name=name,
        datastore=datastore,
        datastore_path=os.path.abspath(datastore_path),
        etcd_endpoints=etcd_endpoints if datastore == "etcdv3" else "",
        ip=ip,
        ip_autodetection_method=ip_autodetection_method,
        ip6=ip6,
        networking_backend=networking_backend,
        cni_conf_dir=os.path.abspath(cni_conf_dir),
        cni_bin_dir=os.path.abspath(cni_bin_dir),
        felix_health_port=felix_health_port,
        goldmane_port=goldmane_port,
        whisker_port=whisker_port,
    )
    code = run_node(settings, layout, ready_timeout, print_logs)
    if code:
        raise SystemExit(code)


@node_group.command("stop")
@STATE_DIR_OPTION
@click.option(
    "--cleanup",
    is_flag=True,
    help="Also remove the nftables table, workload interfaces and routes, the demo's "
    "workloads and the installed CNI files.",
)
def stop_command(state_dir: str, cleanup: bool) -> None:
    """Stop every process the node started. Without --cleanup the dataplane stays programmed,
    so workloads keep working and the next 'calico node run' takes over without a gap."""
    from calico.node.run.stop import stop_node

    stop_node(lay.layout_for(state_dir), cleanup, click.echo)


@node_group.command("status")
@STATE_DIR_OPTION
def status_command(state_dir: str) -> None:
    """Process health, each component's readiness and the local endpoint count."""
    from calico.node.run.status import gather, print_report

    report = gather(lay.layout_for(state_dir))
    print_report(report, click.echo)
    if not report.healthy:
        raise SystemExit(1)
