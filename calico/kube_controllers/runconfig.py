"""Get or create the ``default`` KubeControllersConfiguration, publish what we run with in
its status, and notice when the merged config changes (design/kube-controllers.md
"Configuration").

Upstream watches the resource; this polls it (one GET per interval), which survives datastore
reconnects without extra machinery and is cheap for one singleton. A change in the *merged*
config (resource + environment) is what counts: editing a field the environment overrides
restarts nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from calico.api.kubecontrollers import (
    KubeControllersConfiguration,
    KubeControllersConfigurationStatus,
)
from calico.datastore.client import Client
from calico.datastore.errors import (
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
    UpdateConflictError,
)
from calico.kube_controllers.config import RunConfig, default_spec, resolve, running_spec

log = logging.getLogger(__name__)

NAME = "default"


def get_or_create(client: Client) -> KubeControllersConfiguration:
    for _ in range(5):
        try:
            return client.get(KubeControllersConfiguration, NAME)  # type: ignore[return-value]
        except ResourceDoesNotExistError:
            kcc = KubeControllersConfiguration(spec=default_spec())
            kcc.metadata.name = NAME
            try:
                log.info("Creating KubeControllersConfiguration default with upstream's defaults")
                client.create(kcc)
            except ResourceAlreadyExistsError:
                pass
            continue  # read it back: the stored uid/revision are the datastore's
    raise RuntimeError("KubeControllersConfiguration default keeps appearing and vanishing")


def publish_status(client: Client, kcc: KubeControllersConfiguration, rc: RunConfig) -> None:
    """``status.runningConfig`` and ``status.environmentVars``; written only on change."""
    status = KubeControllersConfigurationStatus(
        running_config=running_spec(rc), environment_vars=dict(rc.env_used) or None
    )
    if kcc.status == status:
        return
    kcc.status = status
    try:
        client.update(kcc)
    except (UpdateConflictError, ResourceDoesNotExistError) as exc:
        log.info("KubeControllersConfiguration changed while publishing status: %s", exc)


class RunConfigWatcher:
    def __init__(self, client: Client, env: Mapping[str, str], datastore_type: str) -> None:
        self.client, self.env, self.datastore_type = client, env, datastore_type

    def load(self) -> RunConfig:
        """The current merged config, status published (ConfigError for a bad one)."""
        kcc = get_or_create(self.client)
        rc = resolve(kcc.spec, self.env, self.datastore_type)
        publish_status(self.client, kcc, rc)
        return rc

    def changed(self, running: RunConfig) -> bool:
        """True when the merged config differs from ``running`` (or has become invalid)."""
        try:
            kcc = get_or_create(self.client)
        except Exception as exc:  # the datastore is down: not a config change
            log.warning("Could not read KubeControllersConfiguration: %s", exc)
            return False
        try:
            current = resolve(kcc.spec, self.env, self.datastore_type)
        except ValueError as exc:
            log.error("KubeControllersConfiguration became invalid: %s", exc)
            return True
        if current != running:
            log.info("Merged configuration changed: restarting to apply it")
            return True
        return False
