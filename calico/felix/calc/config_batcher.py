"""ConfigBatcher: collects Felix's datastore config (global, this host's, and the
nodeSelector-scoped FelixConfigurations matching this host's Node labels) and hands the
dataplane connector one consistent snapshot - only once the syncer is InSync, so Felix never
restarts on a half-loaded config - and again after every effective change."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from calico.felix.calc.callbacks import PipelineCallbacks
from calico.felix.calc.fanout import TypeFanout
from calico.model import GlobalConfigKey, HostConfigKey, ReadyFlagKey, ResourceKey
from calico.selector import Selector, SelectorParseError, parse
from calico.syncer.api import SyncStatus

if TYPE_CHECKING:
    from calico.api.felixconfig import FelixConfiguration


@dataclass(frozen=True)
class ScopedConfig:
    """One selector-scoped FelixConfiguration: its selector (None = matches nothing) and
    its parameters; ``order`` sorts oldest (creationTimestamp, then name) first."""

    order: tuple[str, str]
    selector: Selector | None
    params: Mapping[str, str]


def scoped_config(name: str, res: FelixConfiguration) -> ScopedConfig | None:
    """The selector and parameters of a passed-through FelixConfiguration; None if its
    selector does not parse (the config is then ignored)."""
    from calico.model.processors.confignames import spec_params  # imports the model

    selector = None
    if res.spec.node_selector:
        try:
            selector = parse(res.spec.node_selector)
        except SelectorParseError:
            return None
    params = spec_params(res.spec)
    created = res.metadata.creation_timestamp or ""
    return ScopedConfig((created, name), selector, params)


def _is_felix_configuration(value: Any) -> bool:
    """Whether ``value`` is the model. Imported here, for the first selector-scoped config
    (its processor built one already), so that a start with only ``default``/``node.*``
    configs never imports pydantic (design/performance.md "no pydantic on a clean start")."""
    if value is None:
        return False
    from calico.api.felixconfig import FelixConfiguration

    return isinstance(value, FelixConfiguration)


def _is_scoped_name(name: str) -> bool:
    return name != "default" and not name.startswith("node.")


class ConfigBatcher:
    """Registers GlobalConfigKey, HostConfigKey, ReadyFlagKey, ResourceKey
    (FelixConfiguration, this host's Node) and a status handler.

    Invariants: nothing is emitted before the first InSync; then one ``on_config_update``
    with the full snapshot, and another after each update that changes any of the three
    maps (no-op updates emit nothing). While the Ready flag is false, every emission is
    preceded by ``on_datastore_not_ready()``.
    """

    def __init__(self, callbacks: PipelineCallbacks, hostname: str) -> None:
        self._cb = callbacks
        self._hostname = hostname
        self._global: dict[str, str] = {}
        self._host: dict[str, str] = {}
        self._scoped: dict[str, ScopedConfig] = {}
        self._node_labels: dict[str, str] | None = None
        # Unknown counts as ready: our ClusterInformation processor only emits the flag when
        # datastoreReady is set. An explicit false (or deleting it) makes us not ready.
        self._ready = True
        self._in_sync = False
        self._dirty = True
        self._sent: tuple[dict[str, str], dict[str, str], dict[str, str]] | None = None

    def register(self, fanout: TypeFanout) -> None:
        fanout.register(GlobalConfigKey, self.on_global)
        fanout.register(HostConfigKey, self.on_host)
        fanout.register(ReadyFlagKey, self.on_ready_flag)
        fanout.register(ResourceKey, self.on_resource)
        fanout.register_status_handler(self.on_status)

    def on_global(self, key: GlobalConfigKey, value: str | None) -> None:
        self._set(self._global, key.name, value)

    def on_host(self, key: HostConfigKey, value: str | None) -> None:
        # Other hosts' keys are ignored but not filtered out: the VXLAN resolver needs them.
        if key.hostname == self._hostname:
            self._set(self._host, key.name, value)

    def on_ready_flag(self, key: ReadyFlagKey, value: bool | None) -> None:
        ready = value is True
        if ready != self._ready:
            self._ready = ready
            if not ready:
                self._dirty = True
        self._maybe_send()

    def on_resource(self, key: ResourceKey, value: Any) -> None:
        if key.kind == "FelixConfiguration" and _is_scoped_name(key.name):
            cfg = scoped_config(key.name, value) if _is_felix_configuration(value) else None
            if cfg is None:
                self._dirty |= self._scoped.pop(key.name, None) is not None
            elif cfg != self._scoped.get(key.name):
                self._scoped[key.name] = cfg
                self._dirty = True
        elif key.kind == "Node" and key.name == self._hostname:
            labels = None
            if value is not None:
                labels = dict(value.metadata.labels or {})
            if labels != self._node_labels:
                self._node_labels = labels
                self._dirty = True
        else:
            return
        self._maybe_send()

    def on_status(self, status: SyncStatus) -> None:
        if status is SyncStatus.IN_SYNC and not self._in_sync:
            self._in_sync = True
            self._maybe_send()

    def selector_config(self) -> dict[str, str]:
        """Matching scoped configs merged; for a parameter set by several, the oldest
        config (creationTimestamp, then name) wins."""
        merged: dict[str, str] = {}
        if self._node_labels is None:
            return merged
        for cfg in sorted(self._scoped.values(), key=lambda c: c.order):
            if cfg.selector is not None and cfg.selector.evaluate(self._node_labels):
                for name, text in cfg.params.items():
                    merged.setdefault(name, text)
        return merged

    def _set(self, target: dict[str, str], name: str, value: str | None) -> None:
        if value is None:
            self._dirty |= target.pop(name, None) is not None
        elif target.get(name) != value:
            target[name] = value
            self._dirty = True
        self._maybe_send()

    def _maybe_send(self) -> None:
        if not (self._dirty and self._in_sync):
            return
        self._dirty = False
        snapshot = (dict(self._global), self.selector_config(), dict(self._host))
        if self._ready and snapshot == self._sent:
            return  # e.g. a scoped config changed that does not match this host
        self._sent = snapshot
        if not self._ready:
            self._cb.on_datastore_not_ready()
        self._cb.on_config_update(*snapshot)
