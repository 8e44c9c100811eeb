"""A syncer that lists then watches each resource type of a Backend.

One watcher thread per resource type feeds a single queue. Whichever watcher thread finds no
delivery in progress delivers everything queued (its own message and any others), holding the
delivery lock, so callbacks are never called concurrently and see the queue's order; a thread
that finds the lock taken leaves its message to the holder, which looks at the queue again
after letting go. There is no dispatcher thread: a change reaches the consumer on the thread
that converted it, without a thread hand-over (design/performance.md "TTFR at 100 policies:
hand-overs").

The datastore boundary is here: each cache parses the stored path into its ``ResourceKey`` and
the stored text into JSON, hands both to the type's update processor, and from then on only
typed ``Key`` objects and values travel (see design/syncer.md).

Invariants (tested in tests/integration/syncer):
- The first status is WaitForDatastore. A cache never sends keys while waiting: it reports
  ResyncInProgress first.
- Per v1 key: NEW the first time it is seen, UPDATED when its revision changes (same revision is
  swallowed), DELETED only for keys that were sent.
- Aggregate status: IN_SYNC when every cache is in sync; WAIT_FOR_DATASTORE when every cache is
  waiting; RESYNC_IN_PROGRESS otherwise. Pending updates are flushed before every status change.
- After a watch error (compaction, connection loss) the cache relists and emits synthetic deletes
  for keys that vanished meanwhile; list failures are retried with back-off.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from calico.backoff import Backoff
from calico.datastore import Backend, DatastoreError, EventType, KVPair
from calico.model import KINDS, Key, ResourceKey
from calico.model.processors import Processor, resource_passthrough
from calico.model.resources import resource_key_checked, resource_prefix
from calico.syncer import jsondecode
from calico.syncer.api import SyncerCallbacks, SyncStatus, Update, UpdateType, sorted_keys

log = logging.getLogger(__name__)

MIN_RESYNC_INTERVAL = 0.5
LIST_RETRY_INTERVAL = 1.0
MAX_RETRY_INTERVAL = 10.0
WATCH_POLL = 1.0  # only to notice `stopping` if stop() raced the watch's creation
MAX_UPDATES_PER_CALL = 1000


LeanReader = Callable[[ResourceKey, Any], Mapping[Key, Any] | None]


def _named(ref: Any) -> Any:
    """A processor given by name, resolved (imported) now; a callable as it is."""
    if isinstance(ref, str):
        from calico.model import processors

        return getattr(processors, ref)
    return ref


@dataclass(frozen=True)
class ResourceType:
    """One watched v3 kind and the update processor that turns its resources into v1 keys and
    values. The processor never sees deletes: the cache diffs what a source produced last.

    ``lean``, where set, is tried first on orjson's decode (``jsondecode.fast``): it answers
    None unless it accepted the document with every leaf it keeps type-checked as a string
    or an integer, so that decode equals the stdlib's and its output equals ``processor``'s;
    for anything it declines the stdlib decodes the text again for ``processor``.

    Either may be given by its name in ``calico.model.processors``: it is then imported on
    first use, so that listing a syncer's kinds imports no processor module (and no model)
    that its datastore never needs (design/performance.md "no pydantic on a clean start")."""

    kind: str
    processor_ref: Processor | str = resource_passthrough
    lean_ref: LeanReader | str | None = None

    @cached_property
    def processor(self) -> Processor:
        return _named(self.processor_ref)  # type: ignore[no-any-return]

    @cached_property
    def lean(self) -> LeanReader | None:
        return None if self.lean_ref is None else _named(self.lean_ref)

    @property
    def prefix(self) -> str:
        return resource_prefix(self.kind)


@dataclass
class _Msg:
    cache: int
    status: SyncStatus | None = None
    updates: list[Update] = field(default_factory=list)


class _Outbox(Protocol):
    def put(self, msg: _Msg) -> None: ...


class _Inbox:
    """What the caches send into: queue the message, then deliver what is queued unless
    another thread is delivering already."""

    def __init__(self, messages: queue.Queue[_Msg], pump: Callable[[], None]) -> None:
        self._messages = messages
        self._pump = pump

    def put(self, msg: _Msg) -> None:
        self._messages.put(msg)
        self._pump()


class _WatcherCache:
    """Lists and watches one ResourceType; keeps what it has sent so it can diff relists."""

    def __init__(
        self,
        index: int,
        rtype: ResourceType,
        backend: Backend,
        out: _Outbox,
        stopping: threading.Event,
    ) -> None:
        self.index = index
        self.rtype = rtype
        self._prefix = rtype.prefix
        self._namespaced = KINDS[rtype.kind].namespaced
        self._kind = KINDS[rtype.kind].kind
        self.backend = backend
        self.out = out
        self.stopping = stopping
        # source resource -> (revision, {v1 key: value})
        # resource -> (revision, the v1 keys it produced): the keys alone tell the next
        # update which keys are UPDATED, NEW or DELETED (the values live in the consumer).
        self.sources: dict[ResourceKey, tuple[int, tuple[Key, ...]]] = {}
        self.thread = threading.Thread(target=self._run, name=f"syncer-{rtype.kind}", daemon=True)
        self._watch: Any = None

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        watch = self._watch
        if watch is not None:
            watch.stop()

    # -- conversion ----------------------------------------------------------------------------

    def source_key(self, path: str) -> ResourceKey | None:
        """The resource a stored path names (None, logged, for anything else under the
        prefix: nothing but this kind's resources can be converted). The prefix fixes kind
        and scope, so only the name (and namespace) segments are left to split."""
        rest = path[len(self._prefix) :] if path.startswith(self._prefix) else ""
        namespace, sep, name = rest.partition("/") if self._namespaced else ("", "", rest)
        if name and "/" not in name and (bool(sep) and bool(namespace)) == self._namespaced:
            # Every check the constructor's path rendering makes has been made just above
            # (the kind is canonical: it indexed KINDS), so the key is built without it.
            return resource_key_checked(self._kind, name, namespace)
        log.warning("Ignoring %r: not a %s resource path", path, self.rtype.kind)
        return None

    def _convert(self, key: ResourceKey, raw: str | None) -> dict[Key, Any]:
        if raw is None:
            return {}
        lean = self.rtype.lean
        if lean is not None and (value := jsondecode.fast(raw)) is not None:
            try:
                out = lean(key, value)
            except Exception as exc:  # as below: the processor would raise the same
                log.warning("Failed to process key=%s: %s", key.default_path(), exc)
                return {}
            if out is not None:
                return dict(out)
        try:
            value = jsondecode.loads(raw)
        except ValueError:
            log.warning("Ignoring unparseable value key=%s", key.default_path())
            return {}
        try:
            return dict(self.rtype.processor(key, value))
        except Exception as exc:  # a bad resource must not stop the syncer
            log.warning("Failed to process key=%s: %s", key.default_path(), exc)
            return {}

    def _apply(self, key: ResourceKey, revision: int, raw: str | None) -> list[Update]:
        """Record a source KV (raw None = deleted) and return the v1 updates it causes."""
        old_rev, old = self.sources.get(key, (None, ()))
        if raw is not None and old_rev == revision:
            return []  # same revision: already sent
        new = self._convert(key, raw)
        rev = str(revision)
        updates = [
            Update(k, v, rev, UpdateType.UPDATED if k in old else UpdateType.NEW)
            for k, v in new.items()
        ]
        updates.extend(Update(k, None, rev, UpdateType.DELETED) for k in old if k not in new)
        if raw is None:
            self.sources.pop(key, None)
        else:
            self.sources[key] = (revision, tuple(new))
        return updates

    # -- loop ----------------------------------------------------------------------------------

    def _send(self, status: SyncStatus | None = None, updates: list[Update] | None = None) -> None:
        self.out.put(_Msg(self.index, status, updates or []))

    def _run(self) -> None:
        backoff = Backoff(LIST_RETRY_INTERVAL, MAX_RETRY_INTERVAL)
        last_list = 0.0
        while not self.stopping.is_set():
            pause = MIN_RESYNC_INTERVAL - (time.monotonic() - last_list)
            if pause > 0 and self.stopping.wait(pause):
                return
            last_list = time.monotonic()
            try:
                listed = self.backend.list(self.rtype.prefix)
            except DatastoreError as exc:
                retry = backoff.next()
                log.warning("Failed to list %s, retrying in %.1fs: %s", self.rtype.kind, retry, exc)
                if self.stopping.wait(retry):
                    return
                continue
            backoff.reset()
            kvs, revision = listed.kvs, listed.revision
            del listed  # the raw values go as they are converted, not after the watch ends
            self._send(status=SyncStatus.RESYNC_IN_PROGRESS)
            self._send(updates=self._resync(kvs))
            self._send(status=SyncStatus.IN_SYNC)
            self._watch_from(revision)
            if not self.stopping.is_set():
                self._send(status=SyncStatus.RESYNC_IN_PROGRESS)

    def _resync(self, kvs: list[KVPair]) -> list[Update]:
        """The updates a fresh listing causes. Consumes ``kvs`` (empty on return), so each raw
        value is freed once converted: at scale the listing's JSON is hundreds of MB."""
        updates: list[Update] = []
        seen = set()
        kvs.reverse()
        while kvs:
            kv = kvs.pop()
            if (key := self.source_key(kv.key)) is None:
                continue
            seen.add(key)
            updates.extend(self._apply(key, kv.revision, kv.value))
        for key in [k for k in self.sources if k not in seen]:
            rev = self.sources[key][0]
            updates.extend(self._apply(key, rev, None))
        return updates

    def _watch_from(self, revision: int) -> None:
        try:
            self._watch = self.backend.watch(self.rtype.prefix, revision)
        except DatastoreError as exc:
            log.warning("Failed to watch %s: %s", self.rtype.kind, exc)
            return
        watch = self._watch
        try:
            while not self.stopping.is_set():
                event = watch.next(timeout=WATCH_POLL)
                if event is None:
                    continue
                if event.type is EventType.ERROR:
                    log.info("Watch of %s ended, resyncing: %s", self.rtype.kind, event.error)
                    return
                if event.type is EventType.BOOKMARK:
                    continue
                if (key := self.source_key(event.key)) is None:
                    continue
                raw = None if event.type is EventType.DELETED else event.value
                updates = self._apply(key, event.revision, raw)
                if updates:
                    self._send(updates=updates)
        finally:
            watch.stop()
            self._watch = None


class WatcherSyncer:
    """Runs one watcher cache per resource type and merges them for one set of callbacks."""

    def __init__(
        self, backend: Backend, resource_types: list[ResourceType], callbacks: SyncerCallbacks
    ) -> None:
        self._callbacks = callbacks
        self._queue: queue.Queue[_Msg] = queue.Queue()
        self._delivering = threading.Lock()  # held by the one thread delivering
        self._closed = False  # stopped, or a callback failed: nothing more is delivered
        self._stopping = threading.Event()
        inbox = _Inbox(self._queue, self._pump)
        self._caches = [
            _WatcherCache(i, rt, backend, inbox, self._stopping)
            for i, rt in enumerate(resource_types)
        ]
        self._statuses = [SyncStatus.WAIT_FOR_DATASTORE] * len(self._caches)
        self._status: SyncStatus | None = None
        self._sent: dict[Key, str] = {}  # v1 key -> revision, for stop()'s deletes

    def start(self) -> None:
        with self._delivering:
            self._set_status(SyncStatus.WAIT_FOR_DATASTORE, [])
        for cache in self._caches:
            cache.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop all threads, then tell the consumer every sent key is gone (as upstream)."""
        self._stopping.set()
        for cache in self._caches:
            cache.stop()
        for cache in self._caches:
            cache.thread.join(timeout)
        # What the caches queued before they stopped is delivered first. A delivery stuck in
        # a callback for longer than ``timeout`` is not waited for any further.
        held = self._delivering.acquire(timeout=timeout)
        try:
            if held:
                self._drain()
            self._closed = True
            if self._sent:
                sent = self._sent
                self._deliver(
                    [Update(k, None, sent[k], UpdateType.DELETED) for k in sorted_keys(sent)]
                )
                self._sent.clear()
        finally:
            if held:
                self._delivering.release()

    @property
    def status(self) -> SyncStatus | None:
        return self._status

    # -- delivery (on the cache threads, one at a time) ----------------------------------------

    def _aggregate(self) -> SyncStatus:
        if all(s is SyncStatus.IN_SYNC for s in self._statuses):
            return SyncStatus.IN_SYNC
        if all(s is SyncStatus.WAIT_FOR_DATASTORE for s in self._statuses):
            return SyncStatus.WAIT_FOR_DATASTORE
        return SyncStatus.RESYNC_IN_PROGRESS

    def _set_status(self, status: SyncStatus, pending: list[Update]) -> None:
        if status is self._status:
            return
        self._deliver(pending)
        pending.clear()
        self._status = status
        self._callbacks.on_status_updated(status)

    def _deliver(self, updates: list[Update]) -> None:
        for i in range(0, len(updates), MAX_UPDATES_PER_CALL):
            batch = updates[i : i + MAX_UPDATES_PER_CALL]
            for u in batch:
                if u.update_type is UpdateType.DELETED:
                    self._sent.pop(u.key, None)
                else:
                    self._sent[u.key] = u.revision
            self._callbacks.on_updates(batch)

    def _pump(self) -> None:
        """Deliver what is queued unless another thread is delivering: that thread sees this
        message too, as it looks at the queue again after releasing the lock."""
        while not self._queue.empty():
            if not self._delivering.acquire(blocking=False):
                return
            try:
                self._drain()
            except Exception:  # as a dead dispatcher did: log it, deliver nothing more
                log.exception("Syncer callback failed; no further updates are delivered")
                self._closed = True
            finally:
                self._delivering.release()

    def _drain(self) -> None:
        """With the lock held: consolidate whatever is queued into one delivery."""
        pending: list[Update] = []
        while True:
            try:
                msg = self._queue.get_nowait()
            except queue.Empty:
                break
            if self._closed:
                continue
            pending.extend(msg.updates)
            if msg.status is not None:
                self._statuses[msg.cache] = msg.status
                new = self._aggregate()
                if new is not self._status:
                    self._set_status(new, pending)
        if pending:
            self._deliver(pending)
