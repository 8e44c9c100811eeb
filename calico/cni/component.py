"""``calico component cni``: install the plugins, or run them explicitly.

``plugin``/``ipam`` serve runtimes or tests that cannot choose argv[0]; they speak exactly the
CNI protocol the launchers do.
"""

from __future__ import annotations

import sys

import click

from calico.cni import daemon_client as dc
from calico.cni import install as inst
from calico.datastore.config import DEFAULT_LOCAL_PATH


@click.group("cni")
def cni_group() -> None:
    """The calico and calico-ipam CNI plugins."""


@cni_group.command("install")
@click.option("--cni-conf-dir", default=inst.DEFAULT_CONF_DIR, show_default=True)
@click.option("--cni-bin-dir", default=inst.DEFAULT_BIN_DIR, show_default=True)
@click.option("--mtu", type=click.IntRange(0, 65535), envvar="CNI_MTU", default=inst.DEFAULT_MTU)
@click.option("--datastore-type", envvar="DATASTORE_TYPE", default="local", show_default=True)
@click.option(
    "--datastore-path",
    envvar="CALICO_DATASTORE_PATH",
    default=DEFAULT_LOCAL_PATH,
    show_default=True,
)
@click.option(
    "--etcd-endpoints",
    default="",
    help="For --datastore-type etcdv3: written as the plugin's etcd_endpoints.",
)
@click.option("--nodename", envvar="KUBERNETES_NODE_NAME", default="", help="Default: hostname.")
@click.option("--network-name", default="k8s-pod-network", show_default=True)
@click.option("--log-level", default="info", show_default=True)
@click.option("--log-file-path", default="", help="Default: the plugin logs to stderr.")
@click.option("--conflist-name", default=inst.CONFLIST_NAME, show_default=True)
@click.option(
    "--template",
    type=click.File("r"),
    envvar="CNI_NETWORK_CONFIG_FILE",
    help="A conflist with __CNI_MTU__, __DATASTORE_TYPE__, __KUBERNETES_NODE_NAME__… placeholders.",
)
@click.option(
    "--daemon-socket",
    metavar="PATH",
    default=None,
    help=(
        f"Make the launchers default {dc.SOCKET_ENV} to PATH (the resident helper's socket; "
        "'off' disables it). Default: the plugin's own lookup."
    ),
)
@click.option(
    "--endpoint-status-dir",
    default=inst.DEFAULT_ENDPOINT_STATUS_DIR,
    show_default=True,
    help="Where Felix writes endpoint status files (EndpointStatusPathPrefix/endpoint-status).",
)
@click.option("--ipam-lock-file", default="", help="Default: /var/run/calico/ipam.lock.")
@click.option(
    "--mtu-file", default="", help="The pod MTU file Felix writes (default /var/lib/calico/mtu)."
)
@click.option("--assign-ipv6", is_flag=True, help="calico-ipam also assigns an IPv6 address.")
def install_command(
    cni_conf_dir: str,
    cni_bin_dir: str,
    mtu: int,
    datastore_type: str,
    datastore_path: str,
    etcd_endpoints: str,
    nodename: str,
    network_name: str,
    log_level: str,
    log_file_path: str,
    conflist_name: str,
    template: click.utils.LazyFile | None,
    daemon_socket: str | None,
    endpoint_status_dir: str,
    ipam_lock_file: str,
    mtu_file: str,
    assign_ipv6: bool,
) -> None:
    """Write the conflist and the plugin launchers (idempotent)."""
    opts = inst.InstallOptions(
        conf_dir=cni_conf_dir,
        bin_dir=cni_bin_dir,
        mtu=mtu,
        datastore_type=datastore_type,
        datastore_path=datastore_path,
        etcd_endpoints=etcd_endpoints,
        nodename=nodename,
        network_name=network_name,
        log_level=log_level,
        log_file_path=log_file_path,
        conflist_name=conflist_name,
        template=template.read() if template is not None else inst.TEMPLATE,
        daemon_socket=daemon_socket,
        endpoint_status_dir=endpoint_status_dir,
        ipam_lock_file=ipam_lock_file,
        mtu_file=mtu_file,
        assign_ipv6=assign_ipv6,
    )
    try:
        results = inst.install(opts)
    except ValueError as exc:
        raise click.ClickException(f"the conflist template is not valid JSON: {exc}") from None
    except OSError as exc:
        raise click.ClickException(f"install failed: {exc}") from None
    for path, changed in results:
        click.echo(f"{'Wrote' if changed else 'Unchanged'} {path}")


@cni_group.command("plugin")
def plugin_command() -> None:
    """Run the calico network plugin (CNI_COMMAND + stdin)."""
    from calico.cni.main import run_plugin

    sys.exit(run_plugin(is_ipam=False))


@cni_group.command("ipam")
def ipam_command() -> None:
    """Run the calico-ipam IPAM plugin (CNI_COMMAND + stdin)."""
    from calico.cni.main import run_plugin

    sys.exit(run_plugin(is_ipam=True))


@cni_group.command("daemon")
@click.option(
    "--socket",
    "socket_path",
    envvar=dc.SOCKET_ENV,
    default=dc.DEFAULT_SOCKET,
    show_default=True,
    help="Unix socket the plugins look for (root-only, mode 0600).",
)
def daemon_command(socket_path: str) -> None:
    """Serve CNI calls from pre-imported code (optional; plugins fall back to in-process)."""
    import logging

    from calico.cni.daemon import serve

    if dc.socket_path({dc.SOCKET_ENV: socket_path}) is None:
        raise click.ClickException("CNI daemon: no socket path given")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        serve(socket_path)
    except OSError as exc:
        raise click.ClickException(f"CNI daemon: {exc}") from None
