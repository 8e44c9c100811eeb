"""``version``: this client's version and commit, then the cluster's from ClusterInformation.

As upstream, the client lines are printed first, so they appear even when the datastore cannot be
reached; the command then fails with "Unable to retrieve Cluster Version or Type: ...". There is
no version-mismatch check here (this is the command that shows the mismatch).
"""

from __future__ import annotations

import time

import click

from calico.buildinfo import build_info
from calico.calicoctl.errors import CtlError, handle_errors
from calico.calicoctl.session import config_option, global_options, open_client
from calico.datastore.client import Client
from calico.datastore.errors import DatastoreError
from calico.durations import parse_duration


def cluster_version(client: Client) -> tuple[str, str]:
    cinfo = client.get("ClusterInformation", "default")
    spec = cinfo.spec  # type: ignore[attr-defined]
    return spec.calico_version or "unknown", spec.cluster_type or "unknown"


@click.command("version")
@click.option("--client", "client_only", is_flag=True, help="Only print the client's version.")
@click.option(
    "--poll",
    default=None,
    metavar="DURATION",
    help="Keep polling the cluster version at this interval (e.g. 1s, 10m); 0 disables.",
)
@config_option
@global_options
@handle_errors
def version_command(client_only: bool, poll: str | None, config_file: str | None) -> None:
    """Display the version of calicoctl and of the cluster it talks to."""
    interval = 0.0
    if poll:
        try:
            interval = parse_duration(poll)
        except ValueError:
            raise CtlError(f"Invalid poll duration specified: {poll}") from None
    info = build_info()
    click.echo(f"Client Version:    {info.version}")
    click.echo(f"Git commit:        {info.git_commit}")
    if client_only:
        return
    shown = ("", "")
    error: str | None = None
    with open_client(config_file, check_version=False) as client:
        while True:
            try:
                current = cluster_version(client)
            except DatastoreError as exc:
                error = f"Unable to retrieve Cluster Version or Type: {exc}"
                shown = ("", "")
            else:
                error = None
                if current[0] != shown[0]:
                    click.echo(f"Cluster Version:   {current[0]}")
                if current[1] != shown[1]:
                    click.echo(f"Cluster Type:      {current[1]}")
                shown = current
            if interval <= 0:
                break
            if error:
                click.echo(error, err=True)
            time.sleep(interval)
    if error:
        raise CtlError(error)
