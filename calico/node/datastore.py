"""Open the datastore the environment names, optionally waiting for it to come up."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping

from calico.datastore.client import Client
from calico.datastore.config import DatastoreConfig, from_env
from calico.datastore.errors import (
    ConnectionFailedError,
    DatastoreError,
    ResourceDoesNotExistError,
)
from calico.datastore.factory import open_backend
from calico.node.errors import NodeError

log = logging.getLogger(__name__)


def datastore_config(env: Mapping[str, str]) -> DatastoreConfig:
    try:
        return from_env(env)
    except DatastoreError as exc:
        raise NodeError(str(exc)) from None


def open_client(
    config: DatastoreConfig,
    wait: bool,
    sleep: Callable[[float], None] = time.sleep,
    should_stop: Callable[[], bool] = lambda: False,
) -> Client:
    """A Client on ``config``'s backend. With ``wait`` (WAIT_FOR_DATASTORE=true) connection
    failures are retried every second, as the node may boot before its datastore."""
    while True:
        try:
            # Initialisation is done explicitly by startup, with the cluster type.
            client = Client(open_backend(config, initialize=False))
            if wait:
                with contextlib.suppress(ResourceDoesNotExistError):
                    client.get("Node", "foo")
                log.info("Datastore connection verified")
            return client
        except ConnectionFailedError as exc:
            if not wait or should_stop():
                raise NodeError(f"cannot connect to the datastore: {exc}") from None
            log.info("Hit error connecting to datastore - retry: %s", exc)
            sleep(1.0)
        except DatastoreError as exc:
            raise NodeError(f"cannot open the datastore: {exc}") from None
