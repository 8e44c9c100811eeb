"""Typha's sync server: one asyncio task group per client connection.

Per connection (design/typha.md "Connection life"): optional TLS handshake and peer identity
check, the client hello within ``handshake_timeout``, the server hello, the snapshot (shared,
pre-encoded: ``snapshots``) — compressed behind a ``DecoderRestart``/``ACK`` pair when the
client offered snappy — then three tasks: the delta sender following breadcrumbs, the pinger,
and the pong reader. Any failure of one ends the connection only: bad input is logged with the
connection id and counted in ``typha_connections_rejected{reason}``, never raised further.

The governor drops one random connection per ``drop_interval`` while more than ``max_conns``
are open (changed at run time by ``set_max_conns``: ``calico.typha.rebalance``); graceful
shutdown closes the listener and spreads the remaining disconnects over ``shutdown_timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import calico
from calico.syncer.api import SyncStatus
from calico.syncer.typhaclient import framing, tls
from calico.syncer.typhaclient.messages import (
    COMPRESSION_SNAPPY,
    Ack,
    ClientHello,
    DecoderRestart,
    Message,
    Ping,
    Pong,
    ProtocolError,
    ServerHello,
    SyncStatusMsg,
    encode,
)
from calico.typha.fanout import Fanout
from calico.typha.metrics import TyphaMetrics
from calico.typha.snapcache import Breadcrumb, SnapshotCache
from calico.typha.snapshots import SnapshotCacheSet

log = logging.getLogger(__name__)

WRITE_SLICE = 1 << 20
LISTEN_BACKLOG = 4096  # thousands of Felixes reconnect at once after a Typha restart
REBALANCE_REASON = "re-balance load with other Typha instances"


@dataclass(frozen=True)
class ServerConfig:
    host: str = ""
    port: int = 5473  # 0 = any free port (tests)
    max_message_size: int = 100
    max_fall_behind: float = 300.0
    new_client_grace: float = 300.0
    ping_interval: float = 10.0
    pong_timeout: float = 60.0
    handshake_timeout: float = 10.0
    write_timeout: float = 120.0
    max_conns: int = 10000
    drop_interval: float = 1.0
    shutdown_timeout: float = 300.0
    shutdown_max_drop_interval: float = 1.0
    binary_snapshot_timeout: float = 1.0
    tls_context: ssl.SSLContext | None = None
    client_cn: str = ""
    client_uri_san: str = ""

    def effective_pong_timeout(self) -> float:
        """Upstream's rule: a pong timeout of at most two ping intervals becomes six."""
        if self.pong_timeout <= 2 * self.ping_interval:
            return 6 * self.ping_interval
        return self.pong_timeout


class Disconnect(Exception):
    """Ends one connection; ``reason`` labels the rejection metric (None: not bad input)."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


async def _within(timeout: float, awaitable: Any) -> Any:
    """``asyncio.timeout`` rather than ``wait_for``: Python 3.11's ``wait_for`` can swallow a
    cancellation that races with completion, which would leave a dropped connection running."""
    async with asyncio.timeout(timeout):
        return await awaitable


def _status_frame(status: SyncStatus, compressed: bool) -> bytes:
    return framing.frame(encode(SyncStatusMsg(status)), compressed)


_STATUS_FRAMES = {(s, c): _status_frame(s, c) for s in SyncStatus for c in (False, True)}


def _delta_frame(crumb: Breadcrumb, compressed: bool) -> bytes:
    """A crumb's deltas as one frame, built once per compression mode and shared."""
    cached = crumb.frames.get(compressed)
    if cached is None:
        cached = crumb.frames[compressed] = framing.frame(crumb.delta_payload(), compressed)
    return cached


class Frames(NamedTuple):
    last: Breadcrumb  # the last crumb these frames cover
    status: SyncStatus  # the last status sent once they are
    data: bytes
    kv_counts: list[int]  # KVs per delta message
    crumbs: int


def build_frames(crumb: Breadcrumb, status: SyncStatus, compressed: bool, max_kvs: int) -> Frames:
    """The frames from ``crumb`` on for a client that last saw ``status``: each crumb's shared
    delta frame, a status frame only on change, crumbs joined up to ``max_kvs`` KVs."""
    frames: list[bytes] = []
    counts: list[int] = []
    kvs, n = 0, 1
    while True:
        if crumb.deltas:
            frames.append(_delta_frame(crumb, compressed))
            kvs += len(crumb.deltas)
            counts.append(len(crumb.deltas))
        if crumb.status is not status:
            status = crumb.status
            frames.append(_STATUS_FRAMES[(status, compressed)])
        if crumb.next is None or kvs >= max_kvs:
            break
        crumb = crumb.next
        n += 1
    data = frames[0] if len(frames) == 1 else b"".join(frames)
    return Frames(crumb, status, data, counts, n)


class SyncServer:
    def __init__(
        self,
        caches: dict[str, SnapshotCache],
        config: ServerConfig,
        metrics: TyphaMetrics,
        on_governor_tick: Callable[[], None] | None = None,
    ) -> None:
        self.caches = caches
        self.config = config
        self.metrics = metrics
        self._snapshots = {
            name: SnapshotCacheSet(
                cache, metrics, config.max_message_size, config.binary_snapshot_timeout
            )
            for name, cache in caches.items()
        }
        self.fanouts = {
            name: Fanout(name, cache, metrics, build_frames, config.max_message_size)
            for name, cache in caches.items()
        }
        self._on_governor_tick = on_governor_tick
        self._conns: dict[int, asyncio.Task[None]] = {}
        self._next_id = itertools.count((random.getrandbits(31) << 32) | 1)
        self._server: asyncio.base_events.Server | None = None
        self._governor: asyncio.Task[None] | None = None
        self.max_conns = config.max_conns
        self.port = 0

    @property
    def num_connections(self) -> int:
        return len(self._conns)

    async def start(self) -> None:
        for cache in self.caches.values():
            cache.attach_loop(asyncio.get_running_loop())
        self._server = await asyncio.start_server(
            self._on_connect,
            self.config.host or None,
            self.config.port,
            reuse_address=True,
            backlog=LISTEN_BACKLOG,
        )
        socks = sorted(self._server.sockets, key=lambda s: s.family != socket.AF_INET)
        self.port = int(socks[0].getsockname()[1])  # the IPv4 one when port 0 bound several
        self._governor = asyncio.create_task(self._govern())
        log.info("Typha listening host=%r port=%d", self.config.host, self.port)

    # -- governor and shutdown ----------------------------------------------------------------

    def set_max_conns(self, limit: int) -> None:
        """The governor's limit from now on (loop thread); excess goes one drop per tick."""
        self.max_conns = limit

    def _live_connections(self) -> int:
        """Open connections not already being dropped."""
        return sum(not task.cancelling() for task in self._conns.values())

    def _drop_random(self, why: str) -> bool:
        candidates = [cid for cid, task in self._conns.items() if not task.cancelling()]
        if not candidates:
            return False
        conn_id = random.choice(candidates)
        log.info("Dropping connection %d: %s", conn_id, why)
        self.metrics.connections_dropped.inc()
        self._conns[conn_id].cancel()
        return True

    async def _govern(self) -> None:
        while True:
            await asyncio.sleep(self.config.drop_interval * (1 + random.random() * 0.1))
            if self._on_governor_tick is not None:
                self._on_governor_tick()
            if self._live_connections() > self.max_conns:
                self._drop_random(REBALANCE_REASON)

    async def graceful_shutdown(self) -> None:
        """Stop accepting, then drop the connections one at a time over the shutdown budget."""
        if self._server is not None:
            self._server.close()
        if self._governor is not None:
            self._governor.cancel()
        n = len(self._conns)
        log.info("Graceful shutdown: %d connection(s) to drop", n)
        if n:
            interval = min(
                self.config.shutdown_timeout * 0.95 / n, self.config.shutdown_max_drop_interval
            )
            while self._live_connections() > 1:
                await asyncio.sleep(interval * 0.95 * (1 + random.random() * 0.1))
                if not self._drop_random("graceful shutdown"):
                    break
        for task in list(self._conns.values()):
            task.cancel()
        if self._conns:
            await asyncio.gather(*self._conns.values(), return_exceptions=True)
        log.info("Server has shut down.")

    # -- one connection ------------------------------------------------------------------------

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn_id = next(self._next_id)
        task = asyncio.current_task()
        assert task is not None
        self._conns[conn_id] = task
        self.metrics.connections_accepted.inc()
        self.metrics.connections_active.inc()
        peer = writer.get_extra_info("peername")
        conn = _Connection(self, conn_id, reader, writer)
        try:
            await conn.run()
        except Disconnect as exc:
            if exc.reason is not None:
                self.metrics.connections_rejected.labels(exc.reason).inc()
                log.warning("Connection %d from %s: %s; disconnecting", conn_id, peer, exc)
            else:
                log.info("Connection %d from %s: %s", conn_id, peer, exc)
        except asyncio.CancelledError:
            log.info("Connection %d from %s dropped", conn_id, peer)
        except (OSError, asyncio.IncompleteReadError) as exc:
            log.info("Connection %d from %s closed: %s", conn_id, peer, exc or type(exc).__name__)
        except Exception:
            log.exception("Connection %d from %s failed", conn_id, peer)
        finally:
            self._conns.pop(conn_id, None)
            self.metrics.connections_active.dec()
            if conn.streaming_syncer:
                self.metrics.connections_streaming.labels(conn.streaming_syncer).dec()
            writer.transport.abort()


class _Connection:
    def __init__(
        self,
        server: SyncServer,
        conn_id: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.server = server
        self.config = server.config
        self.metrics = server.metrics
        self.conn_id = conn_id
        self.reader = reader
        self.writer = writer
        self.compressed = False
        self.syncer = ""
        self.streaming_syncer = ""
        self._write_latency: Any = None

    # -- I/O -----------------------------------------------------------------------------------

    async def _read(self) -> Message:
        header = await self.reader.readexactly(framing.HEADER.size)
        try:
            length = framing.check_length(header, framing.MAX_INBOUND_SERVER)
        except framing.FrameTooLargeError as exc:
            raise Disconnect(str(exc), "oversized") from None
        payload = await self.reader.readexactly(length) if length else b""
        try:
            return framing.decode_payload(payload, False)  # clients never compress
        except ProtocolError as exc:
            raise Disconnect(f"bad message: {exc}", "protocol") from None

    async def _drain(self) -> None:
        if not self.writer.transport.get_write_buffer_size():
            return  # the kernel took it all: nothing to wait for (the common fan-out case)
        try:
            await _within(self.config.write_timeout, self.writer.drain())
        except TimeoutError:
            raise Disconnect(
                f"write timed out after {self.config.write_timeout}s (slow reader)", "slow-reader"
            ) from None

    async def _write(self, data: bytes) -> None:
        start = time.monotonic()
        if len(data) <= WRITE_SLICE:
            self.writer.write(data)
            await self._drain()
        else:
            view = memoryview(data)
            for i in range(0, len(view), WRITE_SLICE):
                self.writer.write(view[i : i + WRITE_SLICE])
                await self._drain()
        if self._write_latency is None and self.syncer:
            self._write_latency = self.metrics.client_write_latency_secs.labels(self.syncer)
        if self._write_latency is not None:
            self._write_latency.observe(time.monotonic() - start)

    async def _send(self, msg: Message, compressed: bool | None = None) -> None:
        c = self.compressed if compressed is None else compressed
        await self._write(framing.frame_message(msg, c))

    # -- phases --------------------------------------------------------------------------------

    async def run(self) -> None:
        if self.config.tls_context is not None:
            await self._tls_handshake()
        hello = await self._handshake()
        crumb = await self._send_snapshot(hello)
        self.streaming_syncer = self.syncer
        self.metrics.connections_streaming.labels(self.syncer).inc()
        tasks = [
            asyncio.create_task(self._send_deltas(crumb, time.monotonic())),
            asyncio.create_task(self._ping()),
            asyncio.create_task(self._read_pongs()),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                t.result()  # raise the first failure
        finally:
            for t in tasks:
                t.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(*tasks, return_exceptions=True)

    async def _tls_handshake(self) -> None:
        ctx = self.config.tls_context
        assert ctx is not None
        try:
            await _within(self.config.handshake_timeout, self.writer.start_tls(ctx))
        except TimeoutError:
            raise Disconnect("TLS handshake timed out", "tls") from None
        except (ssl.SSLError, OSError) as exc:
            raise Disconnect(f"TLS handshake failed: {exc}", "tls") from None
        peercert = self.writer.get_extra_info("peercert")
        err = tls.peer_identity_error(peercert, self.config.client_cn, self.config.client_uri_san)
        if err:
            raise Disconnect(err, "tls")

    async def _handshake(self) -> ClientHello:
        try:
            msg = await _within(self.config.handshake_timeout, self._read())
        except TimeoutError:
            raise Disconnect("timed out waiting for the client hello", "handshake") from None
        except asyncio.IncompleteReadError:
            raise Disconnect("connection closed before the client hello", "handshake") from None
        if not isinstance(msg, ClientHello):
            raise Disconnect(f"first message was {msg.NAME}, not ClientHello", "handshake")
        syncer = msg.syncer_type or "felix"
        if syncer not in self.server.caches:
            raise Disconnect(f"unsupported syncer type {syncer!r}", "handshake")
        if not msg.supports_modern_policy_keys:
            raise Disconnect("client does not support modern policy keys", "handshake")
        self.syncer = syncer
        self.compressed_snapshot = (
            msg.supports_decoder_restart
            and COMPRESSION_SNAPPY in msg.supported_compression_algorithms
        )
        log.info(
            "Connection %d: hello from %s (%s, syncer %s, conn %d, compression %s)",
            self.conn_id,
            msg.hostname,
            msg.version,
            syncer,
            msg.client_conn_id,
            "snappy" if self.compressed_snapshot else "off",
        )
        await self._send(
            ServerHello(
                version=calico.__version__,
                syncer_type=msg.syncer_type,
                supports_node_resource_updates=True,
                server_conn_id=self.conn_id,
            )
        )
        return msg

    async def _await_ack(self) -> None:
        try:
            msg = await _within(self.config.effective_pong_timeout(), self._read())
        except TimeoutError:
            raise Disconnect("timed out waiting for ACK", "handshake") from None
        if not isinstance(msg, Ack):
            raise Disconnect(f"expected ACK, got {msg.NAME}", "protocol")

    async def _send_snapshot(self, hello: ClientHello) -> Breadcrumb:
        start = time.monotonic()
        snaps = self.server._snapshots[self.syncer]
        if self.compressed_snapshot:
            await self._send(
                DecoderRestart("enable compression: snappy;send binary snapshot", "snappy")
            )
            await self._await_ack()
            self.compressed = True
            crumb, blob = await snaps.get(True)
            await self._write(blob)
            await self._send(DecoderRestart("End of compressed snapshot.", "snappy"))
            await self._await_ack()
        else:
            crumb, blob = await snaps.get(False)
            await self._write(blob)
        self.metrics.client_snapshot_send_secs.labels(self.syncer).observe(time.monotonic() - start)
        log.info(
            "Connection %d: sent snapshot of %d keys (breadcrumb %d)",
            self.conn_id,
            crumb.size,
            crumb.seq,
        )
        return crumb

    async def _send_deltas(self, crumb: Breadcrumb, snapshot_done: float) -> None:
        cache = self.server.caches[self.syncer]
        m, name = self.metrics, self.syncer
        # label children resolved once: this loop runs per breadcrumb for every client
        block, non_block = m.breadcrumb_block.labels(name), m.breadcrumb_non_block.labels(name)
        next_latency = m.next_breadcrumb_latency_secs.labels(name)
        kvs_per_msg, latency = m.kvs_per_msg.labels(name), m.client_latency_secs.labels(name)
        last_status = SyncStatus.WAIT_FOR_DATASTORE
        if crumb.status is not last_status:
            last_status = crumb.status
            await self._write(_STATUS_FRAMES[(last_status, self.compressed)])
        grace_end = snapshot_done + self.config.new_client_grace
        grace_counted = False
        fanout = self.server.fanouts[name]
        transport = self.writer.transport
        while True:
            if crumb.next is None:  # caught up: wait on the shared fast path
                await self._drain()
                crumb, last_status = await fanout.park(
                    self.conn_id, transport, crumb, last_status, self.compressed
                )
                await self._drain()
                continue
            waited = time.monotonic()
            crumb, blocked = await cache.wait_next(crumb)
            (block if blocked else non_block).inc()
            next_latency.observe(time.monotonic() - waited)
            behind = cache.latest().timestamp - crumb.timestamp
            if behind > self.config.max_fall_behind:
                if time.monotonic() > grace_end:
                    raise Disconnect("Client fell behind. Disconnecting.", "fell-behind")
                if not grace_counted:
                    grace_counted = True
                    m.grace_used.labels(name).inc()
            out = build_frames(crumb, last_status, self.compressed, self.config.max_message_size)
            crumb, last_status = out.last, out.status
            if out.crumbs > 1:
                non_block.inc(out.crumbs - 1)
            for count in out.kv_counts:
                kvs_per_msg.observe(count)
            if out.data:
                latency.observe(max(0.0, time.time() - crumb.timestamp))
                await self._write(out.data)

    async def _ping(self) -> None:
        while True:
            interval = self.config.ping_interval
            await asyncio.sleep(interval * (1 + random.random() * 0.1))
            await self._send(Ping(timestamp=time.time()))

    async def _read_pongs(self) -> None:
        timeout = self.config.effective_pong_timeout()
        while True:
            try:
                msg = await _within(timeout, self._read())
            except TimeoutError:
                raise Disconnect(
                    "Too long since last pong from client, disconnecting", "pong-timeout"
                ) from None
            except asyncio.IncompleteReadError:
                raise Disconnect("client closed the connection") from None
            if not isinstance(msg, Pong):
                raise Disconnect(f"unexpected {msg.NAME} from client after handshake", "protocol")
            self.metrics.ping_latency.labels(self.syncer).observe(
                max(0.0, time.time() - msg.ping_timestamp)
            )
