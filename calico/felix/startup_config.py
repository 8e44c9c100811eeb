"""Read Felix's datastore configuration once, at start-up, exactly as the calc graph will see it.

Why: Felix restarts (exit 129) whenever the resolved config changes. If start-up used only the
local sources, the first ``ConfigUpdate`` from the calc graph would always look like a change and
Felix would restart forever. So, like upstream, we load ClusterInformation, the
FelixConfigurations and this host's Node before starting, and push them through the very same
update processors and :class:`ConfigBatcher` the calc graph uses, so both views agree.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from calico.datastore import Backend
from calico.datastore.errors import ResourceDoesNotExistError
from calico.felix.calc.config_batcher import ConfigBatcher
from calico.felix.calc.dispatcher import Dispatcher
from calico.model import key_from_default_path
from calico.model import processors as p
from calico.model.processors.passthrough import Processor
from calico.model.resources import resource_prefix
from calico.syncer.api import SyncStatus

log = logging.getLogger(__name__)


@dataclass
class DatastoreFelixConfig:
    """The three raw config maps (global, selector-scoped, this host) and the ready flag."""

    global_config: dict[str, str] = field(default_factory=dict)
    selector_config: dict[str, str] = field(default_factory=dict)
    host_config: dict[str, str] = field(default_factory=dict)
    ready: bool = True


class _Capture:
    def __init__(self) -> None:
        self.result = DatastoreFelixConfig()

    def on_datastore_not_ready(self) -> None:
        self.result.ready = False

    def on_config_update(self, g: Any, s: Any, h: Any) -> None:
        self.result.global_config, self.result.selector_config = dict(g), dict(s)
        self.result.host_config = dict(h)


def _feed(dispatcher: Dispatcher, processor: Processor, path: str, raw: str) -> None:
    try:
        produced = processor(path, json.loads(raw))
    except Exception as exc:  # a bad resource must not stop Felix starting
        log.warning("Ignoring unparseable config resource %s: %s", path, exc)
        return
    for v1_path, value in produced.items():
        try:
            key = key_from_default_path(v1_path)
        except ValueError:
            continue
        if key is not None:
            dispatcher.on_update(key, value)


def load_datastore_config(backend: Backend, hostname: str) -> DatastoreFelixConfig:
    """Raises the backend's errors (the caller retries while the datastore is unreachable)."""
    capture = _Capture()
    dispatcher = Dispatcher()
    ConfigBatcher(capture, hostname).register(dispatcher)  # type: ignore[arg-type]
    for kind, processor in (
        ("ClusterInformation", p.cluster_information),
        ("FelixConfiguration", p.felix_configuration),
    ):
        for kv in backend.list(resource_prefix(kind)).kvs:
            _feed(dispatcher, processor, kv.key, kv.value)
    node_path = f"{resource_prefix('Node')}{hostname}"
    try:
        kv = backend.get(node_path)
        _feed(dispatcher, p.node, kv.key, kv.value)
    except ResourceDoesNotExistError:
        pass
    dispatcher.on_status(SyncStatus.IN_SYNC)
    return capture.result
