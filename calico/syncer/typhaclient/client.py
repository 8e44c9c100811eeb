"""The Typha sync client: one syncer stream from Typha instead of a datastore connection.

It is a syncer source: ``start()``/``stop()`` like ``WatcherSyncer``, feeding any
``SyncerCallbacks``. Per connection it reports RESYNC_IN_PROGRESS, sends the hello, checks the
server's, then delivers the snapshot and deltas (``OnUpdates`` per KVs message), answers pings,
and follows decoder restarts (compression). When the connection ends and the callbacks are
restart-aware (``RestartAwareCallbacks``, e.g. ``DedupeBuffer``) it tells them
(``on_typha_connection_restarted`` then WAIT_FOR_DATASTORE) and reconnects with back-off; the
dedupe buffer then synthesises deletes for keys missing from the new snapshot. Other callbacks
see the stream end: ``finished`` is set and ``error`` says why.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import random
import socket
import ssl
import threading
import time
from dataclasses import dataclass

import calico
from calico.backoff import Backoff
from calico.syncer.api import RestartAwareCallbacks, SyncerCallbacks, SyncStatus, Update
from calico.syncer.typhaclient import framing, tls
from calico.syncer.typhaclient.kvs import from_serialized
from calico.syncer.typhaclient.messages import (
    COMPRESSION_SNAPPY,
    Ack,
    ClientHello,
    DecoderRestart,
    KVs,
    Message,
    Ping,
    Pong,
    ProtocolError,
    ServerHello,
    SyncStatusMsg,
)

log = logging.getLogger(__name__)

DIAL_TIMEOUT = 10.0
_conn_ids = itertools.count((random.getrandbits(31) << 32) | 1)


@dataclass(frozen=True)
class ClientSettings:
    """How to reach Typha (upstream's Typha* / <PREFIX>TYPHA* names)."""

    addr: str
    syncer_type: str = "felix"
    hostname: str = ""
    info: str = ""
    read_timeout: float = 30.0
    write_timeout: float = 10.0
    key_file: str = ""
    cert_file: str = ""
    ca_file: str = ""
    cn: str = ""
    uri_san: str = ""
    compression: bool = True

    def tls_enabled(self) -> bool:
        return tls.check_settings(
            self.key_file, self.cert_file, self.ca_file, self.cn, self.uri_san, "Typha client"
        )

    def host_port(self) -> tuple[str, int]:
        host, sep, port = self.addr.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"Typha address {self.addr!r} is not host:port")
        return host.strip("[]"), int(port)


class SyncClient:
    def __init__(
        self,
        settings: ClientSettings,
        callbacks: SyncerCallbacks,
        backoff: Backoff | None = None,
    ) -> None:
        self.settings = settings
        self._callbacks = callbacks
        self._restart_aware = isinstance(callbacks, RestartAwareCallbacks)
        self._backoff = backoff or Backoff(0.1, 5.0)
        self._tls = settings.tls_enabled()  # validates the TLS settings up front
        self._stopping = threading.Event()
        self._sock: socket.socket | None = None
        self._thread = threading.Thread(target=self._run, name="typha-client", daemon=True)
        self.finished = threading.Event()
        self.error: str = ""
        self.connections = 0  # successful handshakes (tests, logs)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                try:
                    self._connect_and_stream()
                    self.error = "connection closed"
                except (OSError, ProtocolError, ssl.SSLError, ValueError) as exc:
                    self.error = str(exc) or type(exc).__name__
                if self._stopping.is_set():
                    return
                if not self._restart_aware:
                    log.error("Connection to Typha failed: %s", self.error)
                    return
                delay = self._backoff.next()
                log.warning(
                    "Connection to Typha lost (%s); reconnecting in %.1fs", self.error, delay
                )
                assert isinstance(self._callbacks, RestartAwareCallbacks)
                self._callbacks.on_typha_connection_restarted()
                self._callbacks.on_status_updated(SyncStatus.WAIT_FOR_DATASTORE)
                if self._stopping.wait(delay):
                    return
        finally:
            self.finished.set()

    # -- one connection ------------------------------------------------------------------------

    def _dial(self) -> socket.socket:
        host, port = self.settings.host_port()
        sock = socket.create_connection((host, port), timeout=DIAL_TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if not self._tls:
            return sock
        s = self.settings
        ctx = tls.client_context(s.key_file, s.cert_file, s.ca_file)
        try:
            wrapped = ctx.wrap_socket(sock)
        except BaseException:
            sock.close()
            raise
        err = tls.peer_identity_error(wrapped.getpeercert(), s.cn, s.uri_san)
        if err:
            wrapped.close()
            raise ssl.SSLError(f"Typha server rejected: {err}")
        return wrapped

    def _send(self, sock: socket.socket, msg: Message) -> None:
        sock.settimeout(self.settings.write_timeout)
        sock.sendall(framing.frame_message(msg))

    def _read(self, sock: socket.socket, reader: framing.SocketFrameReader) -> Message:
        sock.settimeout(self.settings.read_timeout)
        return reader.read()

    def _connect_and_stream(self) -> None:
        s = self.settings
        self._callbacks.on_status_updated(SyncStatus.RESYNC_IN_PROGRESS)
        sock = self._dial()
        self._sock = sock
        try:
            if self._stopping.is_set():
                return
            reader = framing.SocketFrameReader(sock)
            hello = ClientHello(
                hostname=s.hostname,
                info=s.info,
                version=calico.__version__,
                syncer_type=s.syncer_type,
                supports_decoder_restart=True,
                supported_compression_algorithms=(COMPRESSION_SNAPPY,) if s.compression else (),
                supports_modern_policy_keys=True,
                client_conn_id=next(_conn_ids),
            )
            self._send(sock, hello)
            reply = self._read(sock, reader)
            if not isinstance(reply, ServerHello):
                raise ProtocolError(f"expected ServerHello, got {reply.NAME}")
            if not reply.supports_node_resource_updates:
                raise ProtocolError("Typha does not support node resource updates")
            if (reply.syncer_type or "felix") != (s.syncer_type or "felix"):
                raise ProtocolError(
                    f"Typha served syncer type {reply.syncer_type!r}, wanted {s.syncer_type!r}"
                )
            log.info(
                "Connected to Typha %s (version %s, server conn %d, syncer %s)",
                s.addr,
                reply.version,
                reply.server_conn_id,
                s.syncer_type,
            )
            self.connections += 1
            self._backoff.reset()
            while not self._stopping.is_set():
                self._handle(sock, reader, self._read(sock, reader))
        finally:
            self._sock = None
            sock.close()

    def _handle(self, sock: socket.socket, reader: framing.SocketFrameReader, msg: Message) -> None:
        if isinstance(msg, KVs):
            updates: list[Update] = []
            for kv in msg.kvs:
                u = from_serialized(kv)
                if u is not None:
                    updates.append(u)
            if updates:
                self._callbacks.on_updates(updates)
        elif isinstance(msg, SyncStatusMsg):
            self._callbacks.on_status_updated(msg.status)
        elif isinstance(msg, Ping):
            self._send(sock, Pong(ping_timestamp=msg.timestamp, pong_timestamp=time.time()))
        elif isinstance(msg, DecoderRestart):
            algo = msg.compression_algorithm
            if algo not in ("", *framing.COMPRESSIONS):
                raise ProtocolError(f"server asked for unknown compression {algo!r}")
            reader.compressed = bool(algo)
            log.debug("Decoder restart (%s): compression=%r", msg.message, algo)
            self._send(sock, Ack())
        else:
            raise ProtocolError(f"unexpected {msg.NAME} from Typha")
