"""The ``calico component confd`` command line (as upstream's: ``--run-once``,
``--confdir``, ``--keep-stage-file``)."""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from calico.datastore.config import DatastoreConfig

log = logging.getLogger(__name__)
DEFAULT_CONFDIR = "/etc/calico/confd"
TYPHA_PREFIXES = ("CONFD_", "FELIX_", "CALICO_")


def _log_level(env: dict[str, str]) -> int:
    text = env.get("BGP_LOGSEVERITYSCREEN", "info").lower()
    return {
        "debug": logging.DEBUG,
        "warning": logging.WARNING,
        "error": logging.ERROR,
        "fatal": logging.CRITICAL,
        "panic": logging.CRITICAL,
    }.get(text, logging.INFO)


def _kubernetes_sources(
    config: DatastoreConfig,
    env: dict[str, str],
    secret_changed: Callable[[str], None],
    services_changed: Callable[[], None],
) -> tuple[Any, Any]:
    """Where BGP passwords and Services come from: watchers on the Kubernetes API, or nothing
    (upstream: "Failed to create secret watcher, not running under Kubernetes?")."""
    from calico.confd.passwords import NoSecretSource, SecretPasswords
    from calico.confd.routegen import RouteGenerator
    from calico.datastore.errors import DatastoreConfigError
    from calico.datastore.kubernetes.collection import CollectionWatcher
    from calico.datastore.kubernetes.rest import Rest
    from calico.datastore.kubernetes.secrets import (
        SecretWatcher,
        api_configuration,
        secret_namespace,
    )

    try:
        api = api_configuration(config, env)
    except DatastoreConfigError as exc:
        log.warning(
            "No Kubernetes API for BGP password Secrets and Services (%s); passwords and "
            "per-service routes not rendered",
            exc,
        )
        return NoSecretSource(), None
    rest = Rest(api)
    watcher = SecretWatcher(rest, secret_namespace(env), secret_changed)
    routegen = RouteGenerator(lambda path, cb: CollectionWatcher(rest, path, cb), services_changed)
    return SecretPasswords(watcher), routegen


@click.command("confd")
@click.option("--run-once", is_flag=True, help="Render once (after the first sync) and exit.")
@click.option(
    "--confdir",
    default=DEFAULT_CONFDIR,
    show_default=True,
    help="Holds conf.d/*.toml and templates/; files are written to DIR/config.",
)
@click.option("--keep-stage-file", is_flag=True, help="Keep the staged files (debugging).")
def confd_command(run_once: bool, confdir: str, keep_stage_file: bool) -> None:
    """Render BIRD's configuration from the datastore and reload BIRD when it changes."""
    from calico import birdctl
    from calico.confd.daemon import Confd
    from calico.confd.localpeers import StatusDir, StatusDirWatcher, status_dir
    from calico.confd.renderer import Renderer
    from calico.confd.resources import ConfigError
    from calico.datastore.config import DatastoreConfig
    from calico.datastore.daemon_config import daemon_datastore_config
    from calico.datastore.errors import DatastoreConfigError
    from calico.datastore.factory import open_backend
    from calico.syncer.typhaclient.env import settings_from_env

    env = dict(os.environ)
    logging.getLogger().setLevel(_log_level(env))
    nodename = env.get("NODENAME", "").strip()
    if not nodename:
        raise click.ClickException("NODENAME is not set: confd renders for one node")
    try:
        renderer = Renderer(Path(confdir), nodename, env, keep_stage=keep_stage_file)
        # upstream's confd reads CONFD_TYPHA*, then FELIX_TYPHA*, then CALICO_TYPHA*
        typha = settings_from_env(TYPHA_PREFIXES, "bgp", nodename, env=env)
    except (ConfigError, ValueError) as exc:  # incl. bad Typha TLS settings
        raise click.ClickException(str(exc)) from None
    backend = None
    try:
        config = daemon_datastore_config()
    except DatastoreConfigError as exc:
        if typha is None:
            raise click.ClickException(str(exc)) from None
        # Through Typha the datastore settings are unused; only the Kubernetes API for
        # Secrets/Services is looked up (KUBECONFIG or in-cluster).
        config = DatastoreConfig()
    if typha is None:  # through Typha confd needs no datastore access
        try:
            backend = open_backend(config)
        except Exception as exc:  # datastore unreachable etc.: clear message, exit 1
            raise click.ClickException(f"cannot open the datastore: {exc}") from None
    confd = Confd(
        backend, renderer, nodename, env, status_path=birdctl.status_file(env), typha=typha
    )
    confd.passwords, confd.routegen = _kubernetes_sources(
        config, env, confd.secret_changed, confd.services_changed
    )
    confd.workloads = StatusDirWatcher(StatusDir(status_dir(env)), confd.workloads_changed)
    signal.signal(signal.SIGTERM, lambda *_: confd.stop_event.set())
    log.info("confd starting for node %s (confdir %s)", nodename, confdir)
    try:
        rc = confd.run(run_once=run_once)
    except KeyboardInterrupt:
        rc = 0
    finally:
        if backend is not None:
            backend.close()
    sys.exit(rc)
