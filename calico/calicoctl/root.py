"""The ``ctl`` group: calicoctl's command tree (``calicoctl X`` runs ``calico ctl X``).

Commands are imported when used: the API models they need take a few hundred milliseconds to
load, which every other ``calico`` invocation (CNI calls, health probes) should not pay. Commands
of other components (``calicoctl node``) are not calicoctl's: the entry layer attaches them
(:meth:`LazyGroup.attach`), so calicoctl depends on no other component.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from calico.calicoctl.flags import apply_log_level, global_options
from calico.gcpause import resume as resume_gc

# command name -> "module:attribute", in help order
COMMANDS = {
    "create": "calico.calicoctl.crud:create_command",
    "apply": "calico.calicoctl.crud:apply_command",
    "replace": "calico.calicoctl.crud:replace_command",
    "delete": "calico.calicoctl.crud:delete_command",
    "get": "calico.calicoctl.get:get_command",
    "patch": "calico.calicoctl.patch:patch_command",
    "label": "calico.calicoctl.label:label_command",
    "validate": "calico.calicoctl.crud:validate_command",
    "version": "calico.calicoctl.version:version_command",
    "datastore": "calico.calicoctl.migrate:datastore_group",
    "ipam": "calico.calicoctl.ipam:ipam_group",
    "explain": "calico.calicoctl.explain:explain_group",
    "flows": "calico.calicoctl.flows:flows_command",
}
SHORT_HELP = {
    "create": "Create resources by file, directory or stdin.",
    "apply": "Create or update resources by file, directory or stdin.",
    "replace": "Replace existing resources by file, directory or stdin.",
    "delete": "Delete resources by file, directory, stdin, or kind and name.",
    "get": "Display resources by file, directory, stdin, or kind and name.",
    "patch": "Patch a pre-existing resource in place.",
    "label": "Add, update or remove a label on a resource.",
    "validate": "Validate resources offline, without writing them.",
    "version": "Display the client and cluster versions.",
    "datastore": "Datastore-wide operations (migrate export/import/lock/unlock).",
    "ipam": "IP address management (show, check, release, configure).",
    "explain": "Explain why traffic is allowed or denied; what policies select.",
    "flows": "Show the flows Goldmane aggregated (allowed/denied, by which policy rule).",
}


def flag_error(exc: click.NoSuchOption) -> str:
    """An unknown flag in cobra's (upstream's) words: ``unknown shorthand flag: 'm' in -m``."""
    name = exc.option_name
    if name.startswith("--"):
        return f"unknown flag: {name}"
    return f"unknown shorthand flag: '{name[1:2]}' in {name}"


def _unknown_flag(exc: click.NoSuchOption) -> None:
    """Report an unknown flag as upstream does: the message alone on stderr, exit code 1."""
    click.echo(flag_error(exc), err=True)
    raise SystemExit(1)


class LazyGroup(click.Group):
    """A group whose own subcommands are imported on first use, listed before attached ones."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._attached_help: dict[str, str] = {}
        self._lazy: dict[str, str] = {}  # attached lazily: name -> "module:attribute"

    def attach(self, command: click.Command, short_help: str) -> None:
        """Add another component's command, with the one-line help this group shows for it."""
        assert command.name is not None and command.name not in COMMANDS
        assert command.name not in self._attached_help
        self.add_command(command)
        self._attached_help[command.name] = short_help

    def attach_lazy(self, name: str, target: str, short_help: str) -> None:
        """:meth:`attach` a command named by ``"module:attribute"``, imported when used."""
        assert name not in COMMANDS and name not in self._attached_help
        self._lazy[name] = target
        self._attached_help[name] = short_help

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            _unknown_flag(exc)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:  # a subcommand's flags (parsed inside invoke)
            _unknown_flag(exc)
            raise

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*COMMANDS, *self._attached_help]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name) or self._lazy.get(cmd_name)
        if target is None:
            return self.commands.get(cmd_name)
        module, _, attr = target.partition(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, SHORT_HELP[name]) for name in COMMANDS]
        rows += list(self._attached_help.items())
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group("ctl", cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@global_options
def ctl() -> None:
    """calicoctl: manage Calico resources in the datastore.

    The datastore comes from -c FILE (a CalicoAPIConfig), else /etc/calico/calicoctl.cfg when it
    exists, else the environment: DATASTORE_TYPE (local or etcdv3), CALICO_DATASTORE_PATH,
    ETCD_ENDPOINTS, ETCD_KEY_FILE, ETCD_CERT_FILE, ETCD_CA_CERT_FILE.

    Success messages go to stdout; errors go to stderr and exit with code 1.
    """
    resume_gc()  # the command's modules are imported (calico.gcpause; main paused)
    apply_log_level()
