"""calicoctl's global flags; kept free of heavy imports so ``calico`` starts fast.

Upstream declares ``-l/--log-level``, ``--allow-version-mismatch`` and ``--context`` as persistent
flags, valid before or after the verb: here they are accepted on the ``ctl`` group and on every
command, and land in one ``GlobalOptions`` on the root context.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import click

DEFAULT_CONFIG_FILE = "/etc/calico/calicoctl.cfg"
LOG_LEVELS = ("panic", "fatal", "error", "warn", "warning", "info", "debug", "trace")
PY_LEVELS = {
    "panic": logging.CRITICAL + 10,
    "fatal": logging.CRITICAL,
    "error": logging.ERROR,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
    "trace": logging.DEBUG,
}
CONFIG_HELP = (
    "Path to the file containing connection configuration in YAML or JSON format. "
    f"[default: {DEFAULT_CONFIG_FILE}, else the environment]"
)


@dataclass
class GlobalOptions:
    """Flags upstream declares as persistent (valid before or after the verb)."""

    log_level: str = "panic"
    allow_version_mismatch: bool = False
    context: str | None = None


META_KEY = "calico.calicoctl.options"


def options() -> GlobalOptions:
    """This invocation's options (``ctx.meta`` is shared by every context of one run)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return GlobalOptions()
    found = ctx.meta.get(META_KEY)
    if not isinstance(found, GlobalOptions):
        found = ctx.meta[META_KEY] = GlobalOptions()
    return found


def set_log_level(level: str) -> None:
    """Apply ``-l``; an unknown name is an error worded as upstream's."""
    low = level.lower()
    if low not in PY_LEVELS:
        _fail(
            f"unknown log level: {level}, expected one of: panic, fatal, error, warn, info, debug"
        )
    options().log_level = low
    logging.getLogger().setLevel(PY_LEVELS[low])


def apply_log_level() -> None:
    logging.getLogger().setLevel(PY_LEVELS[options().log_level])


def _fail(message: str) -> None:
    click.echo(message, err=True)
    raise SystemExit(1)


def config_option(fn: object) -> object:
    """``-c/--config`` as every datastore command declares it."""
    return click.option(
        "-c", "--config", "config_file", default=None, metavar="FILE", help=CONFIG_HELP
    )(fn)  # type: ignore[arg-type]


def _set_mismatch(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        options().allow_version_mismatch = True
    return value


def _set_level(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        set_log_level(value)
    return value


def _set_context(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value:
        options().context = value
    return value


def global_options(fn: object) -> object:
    """Upstream's persistent flags, accepted on the group and on every command."""
    fn = click.option(
        "--allow-version-mismatch",
        is_flag=True,
        expose_value=False,
        callback=_set_mismatch,
        help="Allow client and cluster versions mismatch.",
    )(fn)  # type: ignore[arg-type]
    fn = click.option(
        "-l",
        "--log-level",
        default=None,
        expose_value=False,
        callback=_set_level,
        metavar="LEVEL",
        help="Log level: panic (default), fatal, error, warn, info, debug.",
    )(fn)
    fn = click.option(
        "--context",
        default=None,
        expose_value=False,
        callback=_set_context,
        metavar="NAME",
        help="The name of the kubeconfig context to use (Kubernetes datastore only).",
    )(fn)
    return fn
