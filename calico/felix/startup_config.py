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
from calico.felix.calc.encap_resolver import EncapsulationResolver
from calico.felix.calc.fanout import TypeFanout
from calico.felix.messages import Encapsulation
from calico.model import ResourceKey, key_from_default_path
from calico.model import processors as p
from calico.model.processors.passthrough import Processor
from calico.model.resources import resource_prefix
from calico.syncer import jsondecode
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


def _feed(fanout: TypeFanout, processor: Processor, path: str, raw: str, lean: Any = None) -> None:
    """One stored resource through its update processor into the fan-out (the datastore
    boundary: the path is parsed here, as the syncer's watcher cache parses it). ``lean``, as
    the syncer's ``ResourceType.lean``, is tried first on orjson's decode; None from it
    means "ask the processor"."""
    key = key_from_default_path(path)
    if not isinstance(key, ResourceKey):
        log.warning("Ignoring config resource at unexpected path %r", path)
        return
    try:
        produced = None
        if lean is not None and (value := jsondecode.fast(raw)) is not None:
            produced = lean(key, value)
        if produced is None:
            produced = processor(key, json.loads(raw))
    except Exception as exc:  # a bad resource must not stop Felix starting
        log.warning("Ignoring unparseable config resource %s: %s", path, exc)
        return
    for v1_key, value in produced.items():
        fanout.on_update(v1_key, value)


def load_datastore_config(backend: Backend, hostname: str) -> DatastoreFelixConfig:
    """Raises the backend's errors (the caller retries while the datastore is unreachable)."""
    capture = _Capture()
    fanout = TypeFanout()
    ConfigBatcher(capture, hostname).register(fanout)  # type: ignore[arg-type]
    for kind, processor, lean in (
        ("ClusterInformation", p.cluster_information, p.lean_cluster_information),
        ("FelixConfiguration", p.felix_configuration, p.lean_felix_configuration),
    ):
        for kv in backend.list(resource_prefix(kind)).kvs:
            _feed(fanout, processor, kv.key, kv.value, lean)
    node_path = f"{resource_prefix('Node')}{hostname}"
    try:
        kv = backend.get(node_path)
        _feed(fanout, p.node, kv.key, kv.value, p.lean_node)
    except ResourceDoesNotExistError:
        pass
    fanout.on_status(SyncStatus.IN_SYNC)
    return capture.result


class _EncapCapture:
    def __init__(self) -> None:
        self.encap = Encapsulation()

    def on_encap_update(self, encap: Encapsulation) -> None:
        self.encap = encap


def load_encapsulation(
    backend: Backend, *, ipip_enabled: bool | None = None, vxlan_enabled: bool | None = None
) -> Encapsulation:
    """Which tunnels the IP pools (or the IpInIpEnabled/VXLANEnabled overrides) ask for, as
    the calc graph's EncapsulationResolver will compute it: Felix builds its VXLAN managers
    from this once, and restarts when the resolver later reports something different."""
    capture = _EncapCapture()
    fanout = TypeFanout()
    EncapsulationResolver(
        capture,  # type: ignore[arg-type]
        ipip_enabled=ipip_enabled,
        vxlan_enabled=vxlan_enabled,
    ).register(fanout)
    for kv in backend.list(resource_prefix("IPPool")).kvs:
        _feed(fanout, p.ip_pool, kv.key, kv.value, p.lean_ip_pool)
    fanout.on_status(SyncStatus.IN_SYNC)
    return capture.encap
