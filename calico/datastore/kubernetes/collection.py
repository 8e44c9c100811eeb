"""A local copy of one whole Kubernetes collection, kept fresh by a watch (an informer).

confd's per-service advertisement needs every Service and EndpointSlice, as upstream's route
generator reads them through informers. :class:`CollectionWatcher` lists the collection (the
initial state), then watches from the list's revision, relisting after an expired or failed
watch and retrying with back-off while the API server is unreachable; ``on_change()`` runs on
its thread after the first list and after every change. Objects are the API's raw JSON, keyed
``<namespace>/<name>``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from calico.backoff import Backoff
from calico.datastore.backend import EventType, WatchEvent
from calico.datastore.errors import ConnectionFailedError, DatastoreError
from calico.datastore.kubernetes.rest import Rest
from calico.datastore.kubernetes.watch import KubeWatch

log = logging.getLogger(__name__)
PAGE = 500


def object_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _convert(typ: str, obj: dict[str, Any]) -> list[WatchEvent]:
    kind = {"ADDED": EventType.ADDED, "MODIFIED": EventType.MODIFIED}.get(typ, EventType.DELETED)
    value = None if kind is EventType.DELETED else json.dumps(obj)
    return [WatchEvent(kind, key=object_key(obj), value=value)]


class CollectionWatcher:
    def __init__(
        self,
        rest: Rest,
        path: str,
        on_change: Callable[[], None],
        backoff: tuple[float, float] = (0.1, 5.0),
    ) -> None:
        """``path``: the collection, e.g. ``/api/v1/services`` (all namespaces)."""
        self.rest, self.path, self.on_change = rest, path, on_change
        self.page = PAGE
        self._backoff = backoff
        self._lock = threading.Lock()
        self._objects: dict[str, dict[str, Any]] = {}
        self._synced = False
        self._stop = threading.Event()
        self._watch: KubeWatch | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True, name="k8s-collection")
        self._thread.start()

    @property
    def synced(self) -> bool:
        with self._lock:
            return self._synced

    def objects(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(self._objects)

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            watch = self._watch
        if watch is not None:
            watch.stop()

    def _list(self) -> tuple[dict[str, dict[str, Any]], int]:
        objects: dict[str, dict[str, Any]] = {}
        cont, rv = "", 0
        while True:
            body = self.rest.request("GET", self.path, query={"limit": self.page, "continue": cont})
            meta = body.get("metadata") or {}
            rv = int(meta.get("resourceVersion") or 0)
            for item in body.get("items") or []:
                objects[object_key(item)] = item
            cont = meta.get("continue") or ""
            if not cont:
                return objects, rv

    def _run(self) -> None:
        backoff = Backoff(*self._backoff)
        while not self._stop.is_set():
            try:
                objects, rv = self._list()
            except (ConnectionFailedError, DatastoreError) as exc:
                log.warning("Cannot list %s, retrying: %s", self.path, exc)
                if self._stop.wait(backoff.next()):
                    return
                continue
            with self._lock:
                self._objects, self._synced = objects, True
            self.on_change()
            watch = KubeWatch(self.rest, [(self.path, {}, _convert)], rv, self._backoff)
            with self._lock:
                if self._stop.is_set():
                    watch.stop()
                    return
                self._watch = watch
            for event in watch:
                if event.type is EventType.ERROR:
                    log.info("Watch of %s ended (%s); relisting", self.path, event.error)
                    break
                if event.type is EventType.BOOKMARK:
                    continue
                backoff.reset()
                with self._lock:
                    if event.type is EventType.DELETED:
                        self._objects.pop(event.key, None)
                    else:
                        self._objects[event.key] = json.loads(event.value or "{}")
                self.on_change()
            watch.stop()
            if self._stop.wait(backoff.next()):
                return
