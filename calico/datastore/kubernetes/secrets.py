"""Watch single Kubernetes Secrets by name, in one namespace (confd's BGP passwords).

Upstream confd watches each Secret that a ``password.secretKeyRef`` names, one list+watch per
name (``fieldSelector=metadata.name=<name>``) in calico-node's namespace, and stops the watches
no peering uses any more. :class:`SecretWatcher` does the same over :class:`Rest`: per name a
thread lists (the initial state: present or absent), then watches from the list's revision,
relisting after an expired or failed watch and retrying with back-off while the API server is
unreachable. ``on_change(name)`` runs (on that thread) whenever a name's data changes, and once
after its first list.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from calico.backoff import Backoff
from calico.datastore.backend import EventType, WatchEvent
from calico.datastore.config import DatastoreConfig
from calico.datastore.errors import ConnectionFailedError, DatastoreError
from calico.datastore.kubernetes.kubeconfig import client_configuration
from calico.datastore.kubernetes.rest import Rest
from calico.datastore.kubernetes.watch import KubeWatch

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "kube-system"  # upstream's default when NAMESPACE is unset


def secret_namespace(env: Mapping[str, str]) -> str:
    """calico-node's namespace: ``NAMESPACE``, else ``kube-system`` (as upstream)."""
    return env.get("NAMESPACE", "").strip() or DEFAULT_NAMESPACE


def secret_data(obj: Mapping[str, Any]) -> dict[str, str]:
    """A Secret's ``data`` (base64) decoded, plus ``stringData`` (manifests may carry it; the
    API server merges it into ``data``). Undecodable values are skipped with a warning."""
    out: dict[str, str] = {}
    name = (obj.get("metadata") or {}).get("name", "?")
    for key, value in (obj.get("data") or {}).items():
        try:
            out[key] = base64.b64decode(str(value), validate=True).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            log.warning("Secret %s: key %s is not valid base64; ignored", name, key)
    for key, value in (obj.get("stringData") or {}).items():
        out[key] = str(value)
    return out


def api_configuration(config: DatastoreConfig, env: Mapping[str, str]) -> Any:
    """The Kubernetes API to read Secrets from.

    With the Kubernetes datastore: the datastore's own API. Otherwise, as upstream's confd
    (which builds its Secret client apart from the datastore): ``KUBECONFIG``, else the
    in-cluster service account. DatastoreConfigError when neither is available."""
    if config.datastore_type == "kubernetes":
        return client_configuration(config, env)
    kube = DatastoreConfig(
        datastore_type="kubernetes",
        kubeconfig=env.get("KUBECONFIG") or None,
        source="environment (KUBECONFIG)",
    )
    # No $HOME/.kube/config fallback: upstream looks at KUBECONFIG and the service account only.
    return client_configuration(kube, {**env, "HOME": "/nonexistent"})


@dataclass
class _Entry:
    stop: threading.Event = field(default_factory=threading.Event)
    synced: bool = False
    data: dict[str, str] | None = None  # None: no such Secret
    watch: KubeWatch | None = None


class SecretWatcher:
    """Current data of the Secrets named by :meth:`ensure`, kept fresh by watches."""

    def __init__(
        self,
        rest: Rest,
        namespace: str,
        on_change: Callable[[str], None],
        backoff: tuple[float, float] = (0.1, 5.0),
    ) -> None:
        self.rest, self.namespace, self.on_change = rest, namespace, on_change
        self._backoff = backoff
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/secrets"

    def ensure(self, name: str) -> None:
        """Start watching ``name`` unless already watched."""
        with self._lock:
            if name in self._entries:
                return
            entry = self._entries[name] = _Entry()
        threading.Thread(
            target=self._run, args=(name, entry), daemon=True, name=f"secret-{name}"
        ).start()

    def get(self, name: str) -> tuple[bool, dict[str, str] | None]:
        """(listed at least once, the data or None when the Secret does not exist)."""
        with self._lock:
            entry = self._entries.get(name)
            if entry is None:
                return False, None
            return entry.synced, entry.data

    def watched(self) -> set[str]:
        with self._lock:
            return set(self._entries)

    def retain(self, names: set[str]) -> None:
        """Stop the watches of every other name (no peering references them any more)."""
        with self._lock:
            gone = [n for n in self._entries if n not in names]
            entries = [self._entries.pop(n) for n in gone]
        for entry in entries:
            self._stop(entry)

    def stop(self) -> None:
        self.retain(set())

    @staticmethod
    def _stop(entry: _Entry) -> None:
        entry.stop.set()
        if entry.watch is not None:
            entry.watch.stop()

    # -- one Secret --------------------------------------------------------------------------

    def _set(self, name: str, entry: _Entry, data: dict[str, str] | None) -> None:
        with self._lock:
            if entry.stop.is_set():
                return
            changed = not entry.synced or entry.data != data
            entry.synced, entry.data = True, data
        if changed:
            self.on_change(name)

    def _list(self, name: str) -> tuple[dict[str, str] | None, int]:
        body = self.rest.request("GET", self.path, query={"fieldSelector": f"metadata.name={name}"})
        rv = int((body.get("metadata") or {}).get("resourceVersion") or 0)
        items = [
            i for i in body.get("items") or [] if (i.get("metadata") or {}).get("name") == name
        ]
        return (secret_data(items[0]) if items else None), rv

    def _run(self, name: str, entry: _Entry) -> None:
        backoff = Backoff(*self._backoff)
        query = {"fieldSelector": f"metadata.name={name}"}
        while not entry.stop.is_set():
            try:
                data, rv = self._list(name)
            except (ConnectionFailedError, DatastoreError) as exc:
                log.warning("Cannot read Secret %s/%s, retrying: %s", self.namespace, name, exc)
                if entry.stop.wait(backoff.next()):
                    return
                continue
            self._set(name, entry, data)
            watch = KubeWatch(self.rest, [(self.path, query, _convert)], rv, self._backoff)
            with self._lock:
                if entry.stop.is_set():
                    watch.stop()
                    return
                entry.watch = watch
            for event in watch:
                if event.type is EventType.ERROR:
                    log.info("Watch of Secret %s ended (%s); relisting", name, event.error)
                    break
                if event.type is EventType.BOOKMARK or event.key != name:
                    continue
                backoff.reset()
                if event.type is EventType.DELETED:
                    self._set(name, entry, None)
                else:
                    self._set(name, entry, json.loads(event.value or "{}"))
            watch.stop()
            if entry.stop.wait(backoff.next()):
                return


def _convert(typ: str, obj: dict[str, Any]) -> list[WatchEvent]:
    name = str((obj.get("metadata") or {}).get("name", ""))
    kind = {"ADDED": EventType.ADDED, "MODIFIED": EventType.MODIFIED}.get(typ, EventType.DELETED)
    value = None if kind is EventType.DELETED else json.dumps(secret_data(obj))
    return [WatchEvent(kind, key=name, value=value)]
