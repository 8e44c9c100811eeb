"""The HTTP emitter: Goldmane's sink, POSTing each flow collection as newline-delimited JSON.

Upstream's behaviour (design/goldmane.md "HTTP emitter"): one ``POST`` per collection to
PUSH_URL with ``Content-Type: application/x-ndjson``, one flow per line in the shape Go's
``json.Marshal`` gives a proto ``Flow`` (proto field names, enums as numbers, unset fields
left out); anything but 200 is a failure, retried with per-collection exponential back-off
(1 s doubling to 30 s) up to 15 times, then the collection is dropped. After each success the
collection's end time is the checkpoint, saved atomically to a file (upstream: a ConfigMap) and
loaded at start, so collections ending at or before it are never sent again — which is what
keeps flows Felix resends to a restarted Goldmane from being emitted twice.

Collections are sent strictly in order by one worker thread (the event loop only enqueues), so
a failing endpoint delays later collections instead of letting them overtake and advance the
checkpoint past an unsent one.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from requests.adapters import HTTPAdapter

from calico.backoff import Backoff
from calico.goldmane.convert import flow_to_proto
from calico.goldmane.ring import FlowCollection

log = logging.getLogger(__name__)

MAX_RETRIES = 15
BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 30.0
POST_TIMEOUT = 10.0
CONFIG_POLL = 30.0
_STOP = object()


def go_json(msg: Message) -> dict[str, Any]:
    """``msg`` as Go's encoding/json renders generated proto structs (omitempty, int enums)."""
    out: dict[str, Any] = {}
    for fd, value in msg.ListFields():

        def one(v: Any, fd: FieldDescriptor = fd) -> Any:
            return go_json(v) if fd.type == FieldDescriptor.TYPE_MESSAGE else v

        out[fd.name] = [one(v) for v in value] if fd.is_repeated else one(value)
    return out


def ndjson(collection: FlowCollection) -> bytes:
    return "\n".join(
        json.dumps(go_json(flow_to_proto(f)), separators=(",", ":")) for f in collection.flows
    ).encode()


class Checkpoint:
    """The end time of the last collection sent, in a file that survives restarts."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def load(self) -> int:
        try:
            raw = json.loads(self.path.read_text())
            return int(raw["latestTimestamp"])
        except FileNotFoundError:
            return 0
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.error("Ignoring unreadable emitter state %s: %s", self.path, exc)
            return 0

    def save(self, timestamp: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"latestTimestamp": str(timestamp)}))
        os.replace(tmp, self.path)


class _ServerNameAdapter(HTTPAdapter):
    """Verifies the endpoint's certificate for SERVER_NAME rather than the URL's host."""

    def __init__(self, server_name: str) -> None:
        self._server_name = server_name
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["server_hostname"] = self._server_name
        kwargs["assert_hostname"] = self._server_name
        super().init_poolmanager(*args, **kwargs)


def make_session(
    client_cert: str = "", client_key: str = "", ca_cert: str = "", server_name: str = ""
) -> requests.Session:
    """The emitter's HTTP client: client certificate, private CA and its server name if set."""
    session = requests.Session()
    if client_cert and client_key:
        session.cert = (client_cert, client_key)
    if ca_cert:
        session.verify = ca_cert
        if server_name:
            session.mount("https://", _ServerNameAdapter(server_name))
    return session


class SinkSwitch:
    """FILE_CONFIG_PATH's ``{"emitFlows": true}``, re-read at most every CONFIG_POLL seconds.

    Without a path the sink is always on; a missing or malformed file means off.
    """

    def __init__(self, path: str, clock: Callable[[], float]) -> None:
        self.path, self.clock = path, clock
        self._checked = float("-inf")
        self._enabled = not path

    def enabled(self) -> bool:
        if not self.path or self.clock() - self._checked < CONFIG_POLL:
            return self._enabled
        self._checked = self.clock()
        try:
            wanted = json.loads(Path(self.path).read_text()).get("emitFlows") is True
        except (OSError, ValueError, AttributeError):
            wanted = False
        if wanted != self._enabled:
            log.info("Flow emitter %s by %s", "enabled" if wanted else "disabled", self.path)
        self._enabled = wanted
        return wanted


class Emitter:
    """Sends collections in order from its own thread; ``receive`` is safe from any thread."""

    def __init__(
        self,
        url: str,
        checkpoint: Checkpoint,
        session: requests.Session | None = None,
        max_retries: int = MAX_RETRIES,
        backoff: Backoff | None = None,
    ) -> None:
        self.url = url
        self.checkpoint = checkpoint
        self.session = session or requests.Session()
        self.max_retries = max_retries
        self.backoff = backoff or Backoff(BACKOFF_INITIAL, BACKOFF_MAX)
        self.latest = checkpoint.load()
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self._queue: queue.Queue[object] = queue.Queue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def receive(self, collections: list[FlowCollection]) -> None:
        for c in collections:
            self._queue.put(c)

    def start(self) -> None:
        log.info("Flow emitter posting to %s (checkpoint %d)", self.url, self.latest)
        self._thread = threading.Thread(target=self._run, name="goldmane-emitter", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._queue.put(_STOP)
        if self._thread is not None:
            self._thread.join(timeout)

    def idle(self) -> bool:
        """Nothing queued or in flight (tests wait for this before asserting)."""
        return self._queue.unfinished_tasks == 0

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                assert isinstance(item, FlowCollection)
                self._send_with_retries(item)
            finally:
                self._queue.task_done()

    def _send_with_retries(self, collection: FlowCollection) -> None:
        self.backoff.reset()
        for attempt in range(self.max_retries + 1):
            try:
                self.emit(collection)
                return
            except (requests.RequestException, OSError, EmitError) as exc:
                self.failed += 1
                log.error("Error emitting flows to %s: %s", self.url, exc)
            if attempt == self.max_retries:
                break
            if self._stop.wait(self.backoff.next()):
                return
        self.dropped += 1
        log.error("Max retries exceeded, dropping flows [%d, %d)", collection.start, collection.end)

    def emit(self, collection: FlowCollection) -> None:
        """One attempt; raises on failure. Already-sent collections are skipped."""
        if collection.end <= self.latest:
            log.debug("Skipping already emitted flows ending %d", collection.end)
            return
        rsp = self.session.post(
            self.url,
            data=ndjson(collection),
            headers={"Content-Type": "application/x-ndjson"},
            timeout=POST_TIMEOUT,
        )
        if rsp.status_code != 200:
            raise EmitError(f"HTTP {rsp.status_code} from {self.url}")
        self.sent += 1
        self.latest = collection.end
        try:
            self.checkpoint.save(self.latest)
        except OSError as exc:
            log.warning("Error saving emitter state to %s: %s", self.checkpoint.path, exc)


class EmitError(Exception):
    """The endpoint answered, but not with 200."""
