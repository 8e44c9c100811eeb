"""The registry behind ``calico component <name>``.

Adding a component is one line: its name and the ``module:attribute`` of its click command.
Only components that exist are listed; commands are imported lazily so ``calico health`` does not
pay for importing felix.
"""

from __future__ import annotations

import importlib

import click

COMPONENTS: dict[str, str] = {
    "cni": "calico.cni.component:cni_group",
    "confd": "calico.confd.command:confd_command",
    "felix": "calico.felix.daemon:felix_command",
    "goldmane": "calico.goldmane.daemon:goldmane_command",
    "guardian": "calico.guardian.daemon:guardian_command",
    "kube-controllers": "calico.kube_controllers.daemon:kube_controllers_command",
    "node": "calico.node.command:node_group",
    "typha": "calico.typha.daemon:typha_command",
    "whisker-backend": "calico.whisker.daemon:whisker_backend_command",
}


class UnknownComponentError(click.UsageError):
    """``calico component <x>`` for a name that is not registered."""


def available() -> list[str]:
    return sorted(COMPONENTS)


def load(name: str) -> click.Command:
    module_name, _, attr = COMPONENTS[name].partition(":")
    command = getattr(importlib.import_module(module_name), attr)
    if not isinstance(command, click.Command):
        raise TypeError(f"component {name!r} does not point at a click command")
    return command


class ComponentGroup(click.Group):
    """A click group whose subcommands come from COMPONENTS."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return available()

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMPONENTS:
            return None
        return load(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0]
        if name not in COMPONENTS:
            names = ", ".join(available()) or "none yet"
            raise UnknownComponentError(f'unknown component "{name}"; available: {names}')
        return super().resolve_command(ctx, args)
