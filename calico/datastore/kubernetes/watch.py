"""Kubernetes watches as one Backend Watch.

One thread per collection a prefix covers runs ``?watch=true&resourceVersion=R&
allowWatchBookmarks=true``: when the server ends the stream (its request timeout) or the
connection drops, it re-watches from the last revision it saw (an event's or a bookmark's),
with back-off while the server is unreachable. ``410 Expired`` (as the HTTP answer or as an
ERROR event) becomes an ERROR carrying RevisionCompactedError, any other ERROR a DatastoreError;
either is the watch's last event, and the caller (the watcher syncer) relists. A collection
the server does not serve (404: CRD or API group not installed) is empty, as its list is: the
watch looks again every 30 s instead of failing (upstream's "API not installed").

Several collections merge into one stream by arrival, so a bookmark says only what its own
collection has delivered: the merged BOOKMARK carries the lowest revision every served
collection has reached (``_Progress``), never one another collection may still be behind.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from calico.backoff import Backoff
from calico.datastore.backend import EventType, WatchEvent
from calico.datastore.errors import (
    ConnectionFailedError,
    DatastoreError,
    RevisionCompactedError,
)
from calico.datastore.kubernetes.errors import KubeAPIError
from calico.datastore.kubernetes.rest import Rest

log = logging.getLogger(__name__)

# Converts one watch event's object into Backend events (none when it maps to nothing).
Converter = Callable[[str, dict[str, Any]], list[WatchEvent]]

WATCH_TIMEOUT = 300  # seconds the server may keep one stream open (client side: 2x + slack)
ABSENT_API_RETRY = 30.0  # a collection that is not served (404) is retried this often


class _Stop(Exception):
    pass


class _Progress:
    """How far each collection of a merged watch has delivered; the merged bookmark is the
    minimum over the collections being served (a 404 collection holds nothing back)."""

    def __init__(self, count: int, start: int) -> None:
        self._reached: list[int | None] = [start] * count
        self._lock = threading.Lock()
        self._sent = start

    def absent(self, index: int) -> None:
        with self._lock:
            self._reached[index] = None

    def served(self, index: int, revision: int) -> None:
        with self._lock:
            if self._reached[index] is None:
                self._reached[index] = revision

    def bookmark(self, index: int, revision: int) -> int | None:
        """Record a collection's bookmark; the merged one to send (never behind an earlier)."""
        with self._lock:
            self._reached[index] = revision
            served = [r for r in self._reached if r is not None]
            merged = min(served) if served else revision
            if merged < self._sent:
                return None
            self._sent = merged
            return merged


class KubeWatch:
    """A Backend Watch over one or more Kubernetes collections."""

    def __init__(
        self,
        rest: Rest,
        sources: list[tuple[str, dict[str, str], Converter]],
        revision: int,
        backoff: tuple[float, float] = (0.1, 5.0),
    ) -> None:
        self._rest = rest
        self._queue: queue.Queue[WatchEvent | None] = queue.Queue()
        self._stopped = threading.Event()
        self._finished = False
        self._lock = threading.Lock()
        self._responses: set[Any] = set()
        self._backoff = backoff
        start = str(revision) if revision > 0 else "0"
        self._progress = _Progress(len(sources), max(revision, 0))
        self._threads = [
            threading.Thread(
                target=self._run,
                args=(index, path, query, conv, start),
                daemon=True,
                name="kdd-watch",
            )
            for index, (path, query, conv) in enumerate(sources)
        ]
        for thread in self._threads:
            thread.start()

    # -- Watch protocol --------------------------------------------------------------------

    def next(self, timeout: float | None = None) -> WatchEvent | None:
        if self._finished or self._stopped.is_set():
            return None
        try:
            event = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if event is None or self._stopped.is_set():
            return None
        if event.type is EventType.ERROR:
            self._finished = True
            self.stop()
        return event

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            responses = list(self._responses)
        for resp in responses:
            with contextlib.suppress(Exception):  # already closed
                resp.shutdown()
        self._queue.put(None)

    def __iter__(self) -> Iterator[WatchEvent]:
        while True:
            event = self.next()
            if event is None:
                return
            yield event
            if event.type is EventType.ERROR:
                return

    # -- one collection --------------------------------------------------------------------

    def _error(self, exc: Exception) -> None:
        self._queue.put(WatchEvent(EventType.ERROR, error=exc))

    def _run(
        self, index: int, path: str, query: dict[str, str], conv: Converter, revision: str
    ) -> None:
        backoff = Backoff(*self._backoff)
        while not self._stopped.is_set():
            params = {
                **query,
                "watch": "true",
                "resourceVersion": revision,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": str(WATCH_TIMEOUT),
            }
            try:
                resp = self._rest.stream(path, params, WATCH_TIMEOUT * 2 + 30)
            except ConnectionFailedError as exc:
                log.warning("Watch of %s failed, retrying: %s", path, exc)
                if self._stopped.wait(backoff.next()):
                    return
                continue
            except KubeAPIError as exc:
                if exc.code == 404:  # API / CRD not installed: nothing to see; look again later
                    self._progress.absent(index)
                    if self._stopped.wait(ABSENT_API_RETRY):
                        return
                    continue
                self._error(_watch_error(exc.code, exc.reason, exc.message, revision))
                return
            with self._lock:
                self._responses.add(resp)
            self._progress.served(index, int(revision) if revision.isdigit() else 0)
            try:
                for event in _lines(resp, self._stopped):
                    typ, obj = event.get("type"), event.get("object") or {}
                    if typ == "ERROR":
                        self._error(
                            _watch_error(
                                int(obj.get("code") or 0),
                                str(obj.get("reason", "")),
                                str(obj.get("message", "")),
                                revision,
                            )
                        )
                        return
                    rv = (obj.get("metadata") or {}).get("resourceVersion")
                    if rv:
                        revision = str(rv)
                    if typ == "BOOKMARK":
                        merged = self._progress.bookmark(index, int(revision))
                        if merged is not None:
                            self._queue.put(WatchEvent(EventType.BOOKMARK, revision=merged))
                        continue
                    try:
                        for out in conv(str(typ), obj):
                            self._queue.put(out)
                    except DatastoreError as exc:
                        self._error(exc)
                        return
                    backoff.reset()
            except _Stop:
                return
            except Exception as exc:  # connection dropped mid-stream: re-watch from revision
                if self._stopped.is_set():
                    return
                log.info("Watch of %s lost its connection, re-watching: %s", path, exc)
                if self._stopped.wait(backoff.next()):
                    return
            finally:
                with self._lock:
                    self._responses.discard(resp)
                resp.release_conn()


def _watch_error(code: int, reason: str, message: str, revision: str) -> DatastoreError:
    if code == 410 or reason in ("Expired", "Gone"):
        rev = int(revision) if revision.isdigit() else 0
        return RevisionCompactedError(rev, 0)
    return DatastoreError(f"watch failed: {message or reason} ({code})")


def _lines(resp: Any, stopped: threading.Event) -> Iterator[dict[str, Any]]:
    buf = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        if stopped.is_set():
            raise _Stop
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield json.loads(line)
    if stopped.is_set():
        raise _Stop
    if buf.strip():
        yield json.loads(buf)
