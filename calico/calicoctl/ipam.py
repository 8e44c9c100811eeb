"""``calicoctl ipam``: the IPAM commands of calico.ipam.cli, attached to calicoctl's datastore.

calico.ipam.cli does not know how to reach a datastore; this group supplies it the way every
calicoctl command does (``-c`` file, default file or environment, version-mismatch check), opening
the datastore only when a subcommand actually asks for a client.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import click

from calico.calicoctl.errors import CtlError, report
from calico.calicoctl.flags import config_option, global_options
from calico.calicoctl.session import client_version, open_client
from calico.datastore.client import Client
from calico.ipam.cli import ipam as ipam_commands


@dataclass
class _Session:
    """``ctx.obj`` for the ipam commands: opens the datastore on the first ``client()`` call."""

    ctx: click.Context
    config_file: str | None
    version: str = field(default_factory=client_version)
    _client: Client | None = None

    def client(self) -> Client:
        if self._client is None:
            try:
                self._client = self.ctx.with_resource(open_client(self.config_file))
            except CtlError as exc:
                report(str(exc))
        return self._client


@click.group(
    "ipam",
    help=ipam_commands.help,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@config_option
@global_options
@click.pass_context
def ipam_group(ctx: click.Context, config_file: str | None) -> None:
    ctx.obj = _Session(ctx, config_file)


for _name, _command in ipam_commands.commands.items():
    ipam_group.add_command(_command, _name)
