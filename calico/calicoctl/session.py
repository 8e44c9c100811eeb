"""Global flags, datastore configuration and the client every datastore command uses.

Upstream order of events for a datastore command: load the config (``-c`` file, else the default
file when present, else the environment), connect, run the version-mismatch check, and — for
commands that write — try to initialise the datastore (ClusterInformation + default tier) without
failing the command if that is not possible.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import calico
from calico.calicoctl.errors import CtlError
from calico.calicoctl.flags import CONFIG_HELP, config_option, global_options, options
from calico.datastore import config as dsconfig
from calico.datastore.errors import (
    ConnectionFailedError,
    DatastoreError,
    ResourceDoesNotExistError,
)
from calico.datastore.factory import open_backend
from calico.model.resources import resource_prefix

if TYPE_CHECKING:
    from calico.datastore.backend import Backend

    # The typed client imports the API models (pydantic); a command that only lists stored
    # text (explain) opens the backend alone (``open_backend_checked``).
    from calico.datastore.client import Client

log = logging.getLogger(__name__)


def client_version() -> str:
    from calico.buildinfo import build_info  # subprocess and pathlib, for ``version`` only

    return build_info().version


def _short_version(version: str) -> str:
    return version.removeprefix("v").split("-")[0]


def check_version_mismatch(client: Client) -> None:
    """Refuse to act on a cluster running another Calico version (unless overridden).

    Skipped when ClusterInformation ``default`` or its ``calicoVersion`` is absent.
    """
    _check_backend_version(client.backend)


def _check_backend_version(backend: Backend) -> None:
    if options().allow_version_mismatch:
        return
    try:
        cluster = _cluster_version(backend)
    except ResourceDoesNotExistError:
        return
    except ConnectionFailedError:
        raise
    except DatastoreError as exc:
        raise CtlError(
            f"Unable to get Cluster Information to verify version mismatch: {exc}\n"
            "Use --allow-version-mismatch to override."
        ) from None
    if not cluster:
        return
    mine = calico.__version__  # what client_version() reports, without asking git
    if _short_version(cluster) != _short_version(mine):
        raise CtlError(
            "Version mismatch.\n"
            f"Client Version:   {mine}\n"
            f"Cluster Version:  {_short_version(cluster)}\n"
            "Use --allow-version-mismatch to override."
        )


def _cluster_version(backend: Backend) -> str:
    """ClusterInformation ``default``'s calicoVersion, read from the stored JSON: decoding it
    through the API models would import and build the cluster kinds' models for one string
    (design/performance.md "Imports"). A value that is not plainly readable goes through the
    validating client, whose errors are the ones reported."""
    kv = backend.get(resource_prefix("ClusterInformation") + "default")
    try:
        raw = json.loads(kv.value)
    except ValueError:
        raw = None
    spec = raw.get("spec") if isinstance(raw, dict) else None
    if isinstance(spec, dict) and isinstance(spec.get("calicoVersion", ""), str):
        return str(spec.get("calicoVersion") or "")
    from calico.datastore.client import Client

    cinfo = Client(backend).get("ClusterInformation", "default")
    return cinfo.spec.calico_version or ""  # type: ignore[attr-defined,no-any-return]


def load_config(config_file: str | None) -> dsconfig.DatastoreConfig:
    """``-c`` (must exist), else the default file when present, else the environment;
    ``--context`` picks the kubeconfig context (Kubernetes datastore only)."""
    config = dsconfig.load(config_file)
    context = options().context
    if context and config.datastore_type == "kubernetes":
        config = dataclasses.replace(config, extra={**config.extra, "k8sCurrentContext": context})
    return config


def try_initialize(client: Client) -> None:
    """Best effort, as upstream: a user allowed to write only some kinds can still work."""
    try:
        client.ensure_initialized(client_version())
    except ConnectionFailedError:
        raise
    except DatastoreError as exc:
        log.info("Unable to initialize datastore: %s", exc)


@contextmanager
def open_client(
    config_file: str | None,
    *,
    check_version: bool = True,
    initialize: bool = False,
    error_prefix: str = "",
) -> Iterator[Client]:
    """A typed client on the configured datastore, closed on exit.

    ``error_prefix`` goes before configuration and version-mismatch errors (``get`` reports
    them as ``failed to get resources: ...``).
    """
    try:
        config = load_config(config_file)
    except DatastoreError as exc:
        raise CtlError(f"{error_prefix}{exc}") from None
    from calico.datastore.client import Client

    backend = open_backend(config)
    try:
        client = Client(backend)
        if check_version:
            try:
                check_version_mismatch(client)
            except CtlError as exc:
                raise CtlError(f"{error_prefix}{exc}") from None
        if initialize:
            try_initialize(client)
        yield client
    finally:
        backend.close()


@contextmanager
def open_backend_checked(config_file: str | None) -> Iterator[Backend]:
    """The configured datastore's backend, version-checked as :func:`open_client` checks it,
    closed on exit: for readers of stored text, which need no typed client."""
    try:
        config = load_config(config_file)
    except DatastoreError as exc:
        raise CtlError(str(exc)) from None
    backend = open_backend(config)
    try:
        _check_backend_version(backend)
        yield backend
    finally:
        backend.close()


__all__ = [
    "CONFIG_HELP",
    "check_version_mismatch",
    "client_version",
    "config_option",
    "global_options",
    "load_config",
    "open_backend_checked",
    "open_client",
    "options",
    "try_initialize",
]
