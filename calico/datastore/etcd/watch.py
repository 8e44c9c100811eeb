"""A Watch over etcd's bidirectional Watch stream, pumped by one background thread."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator

import grpc

from calico.datastore.backend import EventType, WatchEvent
from calico.datastore.errors import ConnectionFailedError, DatastoreError, RevisionCompactedError
from calico.datastore.etcd.connection import FAST_FAILURE_S, Connection, Stubs
from calico.datastore.etcd.keys import decode, prefix_range
from calico.proto.etcd import kv_pb2, rpc_pb2

log = logging.getLogger(__name__)


def _convert(ev: kv_pb2.Event) -> WatchEvent:
    kv = ev.kv
    prev = decode(ev.prev_kv.value) if ev.HasField("prev_kv") else None
    if ev.type == kv_pb2.Event.DELETE:
        return WatchEvent(EventType.DELETED, decode(kv.key), None, prev, kv.mod_revision)
    kind = EventType.ADDED if kv.create_revision == kv.mod_revision else EventType.MODIFIED
    return WatchEvent(kind, decode(kv.key), decode(kv.value), prev, kv.mod_revision)


class EtcdWatch:
    """Events under ``prefix`` with revision > ``revision``; see the Backend protocol.

    The stream is opened on the first endpoint that accepts it. Once events flow, any stream
    failure (server restart, network loss) ends the watch with an ERROR ConnectionFailedError,
    so the caller relists and watches again; a compacted start gives RevisionCompactedError.
    """

    def __init__(self, conn: Connection, prefix: str, revision: int) -> None:
        self._conn = conn
        self._prefix = prefix
        self._revision = revision
        # A SimpleQueue (C) hands each event to next() without Queue's Python-level Condition.
        self._events: queue.SimpleQueue[WatchEvent | None] = queue.SimpleQueue()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._call: grpc.RpcContext | None = None
        self._stubs: Stubs | None = None
        self._thread = threading.Thread(target=self._run, name=f"etcd-watch {prefix}", daemon=True)
        self._thread.start()

    # -- Watch protocol -------------------------------------------------------------------------

    def next(self, timeout: float | None = None) -> WatchEvent | None:
        if self._stopped.is_set():
            return None
        try:
            event = self._events.get(timeout=timeout)
        except queue.Empty:
            return None
        if event is None:  # end marker: leave it for any other reader
            self._events.put(None)
        return event

    def stop(self) -> None:
        with self._lock:
            self._stopped.set()
            call = self._call
        if call is not None:
            call.cancel()
        self._events.put(None)

    def __iter__(self) -> Iterator[WatchEvent]:
        while (event := self.next()) is not None:
            yield event

    # -- pump thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._pump()
        except Exception as exc:  # a bug or a closed client: never leave next() hanging
            log.exception("etcd watch on %s failed", self._prefix)
            if not isinstance(exc, DatastoreError):
                exc = DatastoreError(f"etcd watch failed: {exc}")
            self._emit_error(exc)
        finally:
            self._events.put(None)

    def _pump(self) -> None:
        key, range_end = prefix_range(self._prefix)
        create = rpc_pb2.WatchRequest(
            create_request=rpc_pb2.WatchCreateRequest(
                key=key,
                range_end=range_end,
                start_revision=self._revision + 1,
                progress_notify=True,
                prev_kv=True,
            )
        )
        failures: list[str] = []
        # Each endpoint in turn, on its current channel and then on a fresh one (see
        # Connection.stubs), until one accepts the stream.
        attempts = [(index, fresh) for index in self._conn.order() for fresh in (False, True)]
        skip = -1
        for index, fresh in attempts:
            if self._stopped.is_set():
                return
            if index == skip:  # a slow failure: no quick retry on this endpoint
                continue
            opened = time.monotonic()
            url = self._conn.endpoints[index].url
            done = threading.Event()
            # Keep the stubs (and so the channel) referenced for as long as the stream runs.
            self._stubs = self._conn.stubs(index, fresh=fresh)
            call = self._stubs.watch.Watch(_requests(create, done))
            with self._lock:
                self._call = call
                if self._stopped.is_set():
                    call.cancel()
            started = False
            try:
                for resp in call:
                    started = True
                    if self._handle(resp):
                        return
                error = ConnectionFailedError(f"etcd watch stream from {url} closed by the server")
            except grpc.RpcError as exc:
                if self._stopped.is_set():
                    return
                if not started and exc.code() == grpc.StatusCode.UNAVAILABLE:
                    if fresh or time.monotonic() - opened >= FAST_FAILURE_S:
                        failures.append(f"{url}: {exc.code().name}: {exc.details()}")
                        skip = index
                    continue
                error = ConnectionFailedError(
                    f"etcd watch stream from {url} failed: {exc.code().name}: {exc.details()}"
                )
            finally:
                done.set()
            if not self._stopped.is_set():
                self._emit_error(error)
            return
        self._emit_error(self._conn.unreachable(failures))

    def _handle(self, resp: rpc_pb2.WatchResponse) -> bool:
        """Queue the events of one response; True when the watch is over."""
        if resp.compact_revision:
            self._emit_error(RevisionCompactedError(self._revision, resp.compact_revision))
            return True
        if resp.canceled:
            reason = resp.cancel_reason or "no reason given"
            self._emit_error(
                DatastoreError(f"etcd cancelled the watch on {self._prefix}: {reason}")
            )
            return True
        if resp.created:
            return False
        if not resp.events:  # progress notification
            self._events.put(WatchEvent(EventType.BOOKMARK, revision=resp.header.revision))
            return False
        for ev in resp.events:
            self._events.put(_convert(ev))
        return False

    def _emit_error(self, error: Exception) -> None:
        if not self._stopped.is_set():
            self._events.put(WatchEvent(EventType.ERROR, error=error))


def _requests(
    create: rpc_pb2.WatchRequest, done: threading.Event
) -> Iterator[rpc_pb2.WatchRequest]:
    """The client half of the stream: one create request, then stay open until ``done``."""
    yield create
    done.wait()
