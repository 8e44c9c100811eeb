"""The Goldmane flow client: one long-lived ``FlowCollector.Connect`` stream with receipts.

As upstream's client: ``push`` never blocks (a bounded queue; full = the flow is dropped and
counted); flows are sent one at a time, each waiting for its ``FlowReceipt``; every sent flow is
kept for five minutes and resent first after a reconnect (Goldmane drops the duplicates per
peer); reconnects back off from 1 s doubling to 10 s.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import grpc

from calico.backoff import Backoff
from calico.proto.goldmane import api_pb2 as pb
from calico.proto.goldmane import api_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

RESEND_WINDOW = 300.0
QUEUE_DEPTH = 5000
CONNECT_TIMEOUT = 5.0
_STOP = object()


@dataclass(frozen=True)
class TLSFiles:
    cert: str = ""
    key: str = ""
    ca: str = ""


class ResendCache:
    """Flows sent in the last ``window`` seconds, oldest first."""

    def __init__(self, clock: Callable[[], float], window: float = RESEND_WINDOW) -> None:
        self.clock, self.window = clock, window
        self._items: deque[tuple[float, pb.Flow]] = deque()

    def add(self, flow: pb.Flow) -> None:
        self._items.append((self.clock(), flow))
        self.expire()

    def expire(self) -> None:
        cutoff = self.clock() - self.window
        while self._items and self._items[0][0] < cutoff:
            self._items.popleft()

    def flows(self) -> list[pb.Flow]:
        self.expire()
        return [f for _, f in self._items]

    def __len__(self) -> int:
        return len(self._items)


def _channel(target: str, tls: TLSFiles) -> grpc.Channel:
    if not (tls.cert or tls.key or tls.ca):
        return grpc.insecure_channel(target)

    def read(path: str) -> bytes | None:
        if not path:
            return None
        with open(path, "rb") as f:
            return f.read()

    creds = grpc.ssl_channel_credentials(read(tls.ca), read(tls.key), read(tls.cert))
    return grpc.secure_channel(target, creds)


class FlowClient:
    def __init__(
        self,
        target: str,
        *,
        tls: TLSFiles = TLSFiles(),
        clock: Callable[[], float] = time.monotonic,
        backoff: Backoff | None = None,
    ) -> None:
        self.target, self.tls = target, tls
        self.cache = ResendCache(clock)
        self.backoff = backoff or Backoff(1.0, 10.0)
        self._input: queue.Queue[pb.Flow] = queue.Queue(QUEUE_DEPTH)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.dropped = 0
        self.sent = 0
        self.connects = 0

    def push(self, flow: pb.Flow) -> None:
        try:
            self._input.put_nowait(flow)
        except queue.Full:
            self.dropped += 1

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="goldmane-client", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._session()
            except (grpc.RpcError, OSError) as e:
                detail = e.details() if isinstance(e, grpc.RpcError) else str(e)  # type: ignore[union-attr]
                delay = self.backoff.next()
                log.warning(
                    "Goldmane %s: stream failed (%s); reconnecting in %.1fs",
                    self.target,
                    detail,
                    delay,
                )
                self._stop.wait(delay)

    def _session(self) -> None:
        outbox: queue.Queue[object] = queue.Queue()

        def requests() -> Iterator[pb.FlowUpdate]:
            while True:
                item = outbox.get()
                if item is _STOP:
                    return
                yield item  # type: ignore[misc]

        channel = _channel(self.target, self.tls)
        try:
            try:
                grpc.channel_ready_future(channel).result(timeout=CONNECT_TIMEOUT)
            except grpc.FutureTimeoutError:
                raise OSError(f"not reachable within {CONNECT_TIMEOUT:.0f}s") from None
            receipts = pb_grpc.FlowCollectorStub(channel).Connect(requests())
            self.connects += 1  # sessions established (the channel is ready)

            def send(flow: pb.Flow) -> None:
                outbox.put(pb.FlowUpdate(flow=flow))
                next(receipts)  # strictly one receipt per update before the next send
                self.sent += 1

            for flow in self.cache.flows():  # resend: Goldmane deduplicates per peer
                send(flow)
            log.info("Connected to Goldmane at %s", self.target)
            self.backoff.reset()
            while not self._stop.is_set():
                try:
                    flow = self._input.get(timeout=0.5)
                except queue.Empty:
                    self.cache.expire()
                    if receipts.done():  # Goldmane went away while we were idle: reconnect
                        raise OSError("Goldmane ended the stream") from None
                    continue
                self.cache.add(flow)
                send(flow)
        except StopIteration as e:
            raise OSError("Goldmane closed the stream") from e
        finally:
            outbox.put(_STOP)
            channel.close()
