"""gRPC channels to a list of etcd endpoints, with failover and error translation."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypedDict, TypeVar, Unpack

import grpc

from calico.datastore.config import endpoint_target
from calico.datastore.errors import (
    ConnectionFailedError,
    DatastoreConfigError,
    DatastoreError,
    InvalidValueError,
    RevisionCompactedError,
)
from calico.proto.etcd import rpc_pb2_grpc

T = TypeVar("T")

# Channel options: fail over fast, come back fast after an etcd restart (gRPC's default reconnect
# backoff grows to 120 s, which would keep a restarted server "unavailable" for minutes), notice
# a silently dead server under a long-lived watch, and accept big list pages and watch batches.
CHANNEL_OPTIONS: list[tuple[str, int]] = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # gRPC also uses this as the minimum connect (TCP + TLS + HTTP/2 SETTINGS) timeout.
    ("grpc.min_reconnect_backoff_ms", 3000),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
]

# Codes meaning "this endpoint could not serve the call": try the next one.
_FAILOVER_CODES = {grpc.StatusCode.UNAVAILABLE}
_READ_FAILOVER_CODES = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
# An UNAVAILABLE this quick is a channel replaying its last failure while it backs off:
# worth one retry on a fresh channel (the server may be back).
FAST_FAILURE_S = 0.25


@dataclass(frozen=True)
class Endpoint:
    url: str  # as configured, for messages
    target: str  # host:port for gRPC
    secure: bool


def parse_endpoints(endpoints: Sequence[str] | str) -> list[Endpoint]:
    """``http(s)://host:port`` URLs (a list or a comma-separated string) -> endpoints."""
    items = endpoints.split(",") if isinstance(endpoints, str) else list(endpoints)
    out: list[Endpoint] = []
    for raw in (item.strip() for item in items):
        if raw:
            target, secure = endpoint_target(raw)
            out.append(Endpoint(raw, target, secure))
    if not out:
        raise DatastoreConfigError("no etcd endpoints configured (ETCD_ENDPOINTS is empty)")
    return out


def _read(path: str | None, what: str) -> bytes | None:
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise DatastoreConfigError(f"cannot read etcd {what} {path!r}: {exc.strerror}") from None


class Stubs:
    """The three service stubs on one channel."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.channel = channel
        self.kv = rpc_pb2_grpc.KVStub(channel)
        self.watch = rpc_pb2_grpc.WatchStub(channel)
        self.lease = rpc_pb2_grpc.LeaseStub(channel)


DEFAULT_TIMEOUT = 10.0


class ConnectionOptions(TypedDict, total=False):
    """TLS files (PEM paths) and the per-call deadline in seconds (default 10)."""

    key_file: str | None
    cert_file: str | None
    ca_file: str | None
    timeout: float


class Connection:
    """Lazily opened channels to every endpoint; calls stick to the last endpoint that worked."""

    def __init__(
        self, endpoints: Sequence[str] | str, **options: Unpack[ConnectionOptions]
    ) -> None:
        self.endpoints = parse_endpoints(endpoints)
        self.timeout = options.get("timeout", DEFAULT_TIMEOUT)
        key_file = options.get("key_file")
        cert_file = options.get("cert_file")
        ca_file = options.get("ca_file")
        self._creds: grpc.ChannelCredentials | None = None
        if key_file or cert_file or ca_file or any(e.secure for e in self.endpoints):
            if bool(key_file) != bool(cert_file):
                raise DatastoreConfigError(
                    "etcd TLS needs both ETCD_KEY_FILE and ETCD_CERT_FILE (or neither)"
                )
            self._creds = grpc.ssl_channel_credentials(
                root_certificates=_read(ca_file, "CA certificate file"),
                private_key=_read(key_file, "key file"),
                certificate_chain=_read(cert_file, "certificate file"),
            )
        self._stubs: list[Stubs | None] = [None] * len(self.endpoints)
        self._current = 0
        self._lock = threading.Lock()
        self._closed = False

    @property
    def description(self) -> str:
        return ",".join(e.url for e in self.endpoints)

    def stubs(self, index: int, *, fresh: bool = False) -> Stubs:
        """The endpoint's stubs; ``fresh`` replaces its channel with a new one first.

        A channel that saw its server go away backs off before reconnecting; a new channel
        connects at once, so a restarted server is usable immediately. Callers holding the old
        channel (running watches) keep it alive until they finish.
        """
        with self._lock:
            if fresh:
                self._stubs[index] = None
            if self._closed:
                raise ConnectionFailedError(f"etcd client for {self.description} is closed")
            stubs = self._stubs[index]
            if stubs is None:
                ep = self.endpoints[index]
                if self._creds is not None:
                    channel = grpc.secure_channel(ep.target, self._creds, CHANNEL_OPTIONS)
                else:
                    channel = grpc.insecure_channel(ep.target, CHANNEL_OPTIONS)
                stubs = self._stubs[index] = Stubs(channel)
            return stubs

    def order(self) -> list[int]:
        """Endpoint indexes to try, the last good one first."""
        n = len(self.endpoints)
        start = self._current
        return [(start + i) % n for i in range(n)]

    def mark_good(self, index: int) -> None:
        self._current = index

    def call(self, op: str, fn: Callable[[Stubs, float], T], *, read: bool = False) -> T:
        """Run ``fn(stubs, timeout)`` on each endpoint in turn until one can serve it.

        Writes fail over only on UNAVAILABLE (normally: the request never reached a server);
        reads also on a deadline. Other gRPC errors are translated to datastore errors.
        """
        codes = _READ_FAILOVER_CODES if read else _FAILOVER_CODES
        failures: list[str] = []
        for index in self.order():
            for fresh in (False, True):  # maybe once more on a new channel (see ``stubs``)
                started = time.monotonic()
                try:
                    result = fn(self.stubs(index, fresh=fresh), self.timeout)
                except grpc.RpcError as exc:
                    if exc.code() not in codes:
                        raise translate(exc, op, self.endpoints[index].url) from None
                    quick = time.monotonic() - started < FAST_FAILURE_S
                    if fresh or exc.code() != grpc.StatusCode.UNAVAILABLE or not quick:
                        failures.append(f"{self.endpoints[index].url}: {_details(exc)}")
                        break
                    continue
                self.mark_good(index)
                return result
        raise self.unreachable(failures)

    def unreachable(self, failures: list[str]) -> ConnectionFailedError:
        return ConnectionFailedError(
            f"cannot connect to etcd at {self.description}: " + "; ".join(failures)
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            stubs, self._stubs = self._stubs, [None] * len(self.endpoints)
        for s in stubs:
            if s is not None:
                s.channel.close()


def _details(exc: grpc.RpcError) -> str:
    code = exc.code()
    details = exc.details() if hasattr(exc, "details") else ""
    return f"{code.name if code else 'UNKNOWN'}: {details}"


def translate(exc: grpc.RpcError, op: str, url: str) -> DatastoreError:
    """Map a gRPC error from etcd at ``url`` to the datastore error hierarchy."""
    code = exc.code()
    details = exc.details() or ""
    if "required revision has been compacted" in details:
        return RevisionCompactedError(0, 0)
    if code == grpc.StatusCode.INVALID_ARGUMENT or "request is too large" in details:
        return InvalidValueError(f"etcd at {url} rejected {op}: {details}")
    if code in _READ_FAILOVER_CODES:
        return ConnectionFailedError(f"etcd {op} at {url} failed: {_details(exc)}")
    return DatastoreError(f"etcd {op} at {url} failed: {_details(exc)}")
