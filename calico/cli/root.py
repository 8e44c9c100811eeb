"""The ``calico`` click tree (``component``, ``ctl``, ``health``, ``node``, ``version``) and
:func:`run_cli`, which runs it for :func:`calico.cli.main.main` in CLI mode.

Errors are printed as ``Error: <message>`` on stderr with exit code 1 (usage errors included, as
upstream's cobra root does); a traceback appears only with ``--log-level debug``.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Any

import click

from calico.calicoctl import ctl
from calico.cli.components import ComponentGroup
from calico.gcpause import resume as resume_gc
from calico.logutils import LogLevelError, configure_formatter, parse_level

LOG_LEVELS = ("trace", "debug", "info", "warning", "error", "fatal", "panic")

# Other components' command groups, imported when used: a calicoctl command should not pay for
# the node, bpf and cluster trees (design/performance.md "Imports"). name -> "module:attribute"
LAZY_COMMANDS = {
    "bpf": "calico.felix.bpf.debugcli:bpf_group",  # calico bpf ...: upstream's calico-node -bpf
    "health": "calico.cli.health_cmd:health_command",
    "node": "calico.cli.root:node_command",
}


def _load(target: str) -> click.Command:
    module, _, attr = target.partition(":")
    command = getattr(importlib.import_module(module), attr)
    assert isinstance(command, click.Command)
    return command


class RootGroup(click.Group):
    """The ``calico`` group: its own commands plus :data:`LAZY_COMMANDS`, listed sorted as a
    plain click group lists them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        target = LAZY_COMMANDS.get(cmd_name)
        return None if target is None else _load(target)


@click.group(
    "calico",
    cls=RootGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    help="Log level for this process; debug also shows tracebacks on errors.",
)
def cli(log_level: str) -> None:
    """Calico: container networking and network policy.

    Run a daemon with "calico component <name>", probe one with "calico health".
    """
    if click.get_current_context().invoked_subcommand != "component":
        resume_gc()  # the start-up's objects are built: collect normally from here (main paused)
    configure_formatter("calico", sys.stderr)
    logging.getLogger().setLevel(parse_level(log_level))


@cli.group("component", cls=ComponentGroup)
def component_group() -> None:
    """Run one of Calico's components (daemons and plugins)."""
    # The component's modules are imported by now (click resolves before this callback). Felix
    # resumes itself after its first apply (calico.felix.daemon, calico.gcpause).
    if click.get_current_context().invoked_subcommand != "felix":
        resume_gc()


@cli.command("version")
def version_command() -> None:
    """Print the version, build date and git commit."""
    from calico.buildinfo import version_text

    click.echo(version_text())


cli.add_command(ctl)


def _node_commands() -> tuple[click.Group, click.Command]:
    """Node's ``node`` group with ``cluster`` attached (calico node cluster up|down|status), and
    calicoctl's ``node status`` (upstream's BGP status, calicoctl's own command)."""
    from calico.calicoctl.node_status import status_command
    from calico.node.cluster.cli import cluster_group
    from calico.node.run.cli import node_group

    if "cluster" not in node_group.commands:
        node_group.add_command(cluster_group)
    return node_group, status_command


def __getattr__(name: str) -> Any:
    """``node_command`` (``calico node``) and ``ctl_node_command`` (``calicoctl node``), built
    on first use."""
    if name == "node_command":
        value: click.Command = _node_commands()[0]
    elif name == "ctl_node_command":
        # calicoctl serves the node commands too ("calicoctl node run|stop|status"); calicoctl
        # itself does not depend on node, the entry layer composes them.
        node_group, status_command = _node_commands()
        value = type(node_group)(
            "node",
            help=node_group.help,
            commands={**node_group.commands, "status": status_command},
        )
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


ctl.attach_lazy(
    "node",
    "calico.cli.root:ctl_node_command",
    "Run, stop or inspect a Calico node on this machine.",
)


def _debug_requested(argv: list[str]) -> bool:
    for i, arg in enumerate(argv):
        if arg == "--log-level" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--log-level="):
            value = arg.partition("=")[2]
        else:
            continue
        try:
            return parse_level(value) <= logging.DEBUG
        except LogLevelError:
            return False
    return False


def run_cli(argv: list[str]) -> int:
    """Run the click tree on ``argv`` (argv[0] is the program name); return the exit code."""
    prog = os.path.basename(argv[0]) if argv else "calico"
    # Invoked as calicoctl: run the ctl tree under its own name so help reads "calicoctl ...".
    command: click.Command = cli
    args = argv[1:]
    if prog == "calicoctl" and args[:1] == ["ctl"]:
        command, args = ctl, args[1:]
    try:
        command.main(args=args, prog_name=prog, standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.Abort:
        click.echo("Aborted!", err=True)
        return 1
    except click.UsageError as exc:
        click.echo(f"Error: {exc.format_message()}", err=True)
        return 1
    except click.ClickException as exc:
        exc.show()  # commands may print their errors bare (calicoctl's style)
        return exc.exit_code or 1
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        click.echo(f"Error: {code}", err=True)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if _debug_requested(argv):
            import traceback

            traceback.print_exc()
        click.echo(f"Error: {exc}", err=True)
        return 1
    return 0
