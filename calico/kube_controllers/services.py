"""The LoadBalancer controller's Service informer: list, then watch, relist on 410.

Services are no Calico kind, so the Kubernetes datastore's syncer does not carry them; this
is a plain informer over ``/api/v1/services`` built on the datastore's own REST client and
watch (``calico.datastore.kubernetes.watch.KubeWatch``: reconnects, bookmarks, 410 as an
ERROR event). A relist replaces the whole view, so a Service deleted during an outage is
seen as gone. ``generation`` counts changes; ``in_sync`` is False until the first list.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from calico.backoff import Backoff
from calico.datastore.backend import EventType, WatchEvent
from calico.datastore.errors import DatastoreError
from calico.datastore.kubernetes.rest import Rest
from calico.datastore.kubernetes.watch import KubeWatch

log = logging.getLogger(__name__)

PATH = "/api/v1/services"
Ident = tuple[str, str]  # (namespace, name)


def _ident(obj: dict[str, Any]) -> Ident:
    meta = obj.get("metadata") or {}
    return meta.get("namespace", ""), meta.get("name", "")


def _convert(typ: str, obj: dict[str, Any]) -> list[WatchEvent]:
    ns, name = _ident(obj)
    rv = int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    if typ == "DELETED":
        return [WatchEvent(EventType.DELETED, f"{ns}/{name}", None, revision=rv)]
    return [WatchEvent(EventType.MODIFIED, f"{ns}/{name}", json.dumps(obj), revision=rv)]


class ServiceCache:
    def __init__(self, rest: Rest, backoff: tuple[float, float] = (0.2, 5.0)) -> None:
        self.rest = rest
        self.objects: dict[Ident, dict[str, Any]] = {}
        self.in_sync = False
        self.generation = 0
        self.cond = threading.Condition()
        self._stop = threading.Event()
        self._watch: KubeWatch | None = None
        self._backoff = backoff
        self._thread = threading.Thread(target=self._run, daemon=True, name="kc-services")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        watch = self._watch
        if watch is not None:
            watch.stop()
        self._thread.join(2.0)

    def snapshot(self) -> dict[Ident, dict[str, Any]]:
        with self.cond:
            return dict(self.objects)

    def wait_change(self, generation: int, timeout: float) -> int:
        with self.cond:
            self.cond.wait_for(lambda: self.generation != generation, timeout)
            return self.generation

    def _changed(self) -> None:
        self.generation += 1
        self.cond.notify_all()

    def _run(self) -> None:
        backoff = Backoff(*self._backoff)
        while not self._stop.is_set():
            try:
                listed = self.rest.request("GET", PATH)
            except DatastoreError as exc:
                log.warning("Cannot list Services, retrying: %s", exc)
                self._stop.wait(backoff.next())
                continue
            with self.cond:
                self.objects = {_ident(o): o for o in listed.get("items") or ()}
                self.in_sync = True
                self._changed()
            rv = int((listed.get("metadata") or {}).get("resourceVersion") or 0)
            self._watch = KubeWatch(self.rest, [(PATH, {}, _convert)], rv)
            if self._stop.is_set():
                self._watch.stop()
                return
            for event in self._watch:
                if event.type is EventType.ERROR:
                    log.info("Service watch ended (%s): relisting", event.error)
                    break
                if event.type is EventType.BOOKMARK:
                    continue
                backoff.reset()
                ns, _, name = event.key.partition("/")
                with self.cond:
                    if event.value is None:
                        self.objects.pop((ns, name), None)
                    else:
                        self.objects[(ns, name)] = json.loads(event.value)
                    self._changed()
            self._watch.stop()
