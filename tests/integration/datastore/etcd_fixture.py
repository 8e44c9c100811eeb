"""A real etcd for the datastore integration tests, and isolated EtcdBackends on it.

Import it from a ``conftest.py`` or test module in this directory. Test directories have no
``__init__.py``, so pytest's default "prepend" import mode puts this directory on ``sys.path``
and a plain (not relative) import works::

    from etcd_fixture import etcd_server, make_etcd_backend  # noqa: F401

``etcd_server`` (session scope) starts one etcd 3.4 on free loopback client and peer ports with a
temporary ``--data-dir`` and yields an ``EtcdServer``: ``.endpoints`` ("http://127.0.0.1:PORT"),
``.stop(kill=False)`` and ``.start()`` (same ports and data, waits until healthy). A test that
stops it must start it again (try/finally). It is killed at session end, or at interpreter exit
if pytest dies first. Several modules importing the fixture share the same process. Skips when
no ``etcd`` binary is installed. Raft ticks are shortened, so leases of 1 s expire in ~1-1.5 s.

``make_etcd_backend(endpoints, prefix_isolation)`` returns an EtcdBackend wrapped so that every
key is stored under ``prefix_isolation`` (e.g. ``/test-<uuid>``) and returned without it — in
KVPairs, ListResults, watch events and error ``.key``s — so each test sees an empty keyspace.
Revisions are still the shared server's: they do not start at 0 or 1, and ``compact`` is global;
a watch from before the backend was made starts at its creation revision instead (nothing under a
fresh prefix is older), so other tests' compactions never make it "too old".
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from calico.datastore.backend import Backend, KVPair, ListResult, Watch, WatchEvent
from calico.datastore.errors import DatastoreError
from calico.datastore.etcd import EtcdBackend
from calico.datastore.etcd.server import ETCD_BINARY, EtcdServer

T = TypeVar("T")

_SERVER: EtcdServer | None = None


def shared_etcd_server() -> EtcdServer:
    """The process-wide test etcd, started on first use (and restarted if a test left it down)."""
    global _SERVER
    if _SERVER is None:
        _SERVER = EtcdServer()
    _SERVER.start()
    return _SERVER


@pytest.fixture(scope="session")
def etcd_server() -> Iterator[EtcdServer]:
    global _SERVER
    if shutil.which(ETCD_BINARY) is None:
        pytest.skip(f"no {ETCD_BINARY!r} binary (apt install etcd-server)")
    server = shared_etcd_server()
    try:
        yield server
    finally:
        server.cleanup()
        _SERVER = None


class PrefixedWatch:
    """A Watch whose event keys have the isolation prefix removed."""

    def __init__(self, inner: Watch, prefix: str) -> None:
        self._inner = inner
        self._prefix = prefix

    def next(self, timeout: float | None = None) -> WatchEvent | None:
        ev = self._inner.next(timeout)
        if ev is None or not ev.key:
            return ev
        return WatchEvent(
            ev.type, ev.key[len(self._prefix) :], ev.value, ev.prev_value, ev.revision, ev.error
        )

    def stop(self) -> None:
        self._inner.stop()

    def __iter__(self) -> Iterator[WatchEvent]:
        while (ev := self.next()) is not None:
            yield ev


class PrefixedBackend:
    """A Backend storing keys under ``prefix`` in ``inner`` (test isolation on one etcd)."""

    def __init__(self, inner: Backend, prefix: str) -> None:
        self.inner = inner
        self.prefix = prefix
        # Nothing under a fresh prefix predates this revision, so watching from earlier (e.g. 0)
        # starts here: another test's compaction of older history must not look like ours.
        self.base_revision = inner.current_revision()

    def _strip(self, pair: KVPair) -> KVPair:
        return KVPair(pair.key[len(self.prefix) :], pair.value, pair.revision, pair.ttl)

    def _call(self, fn: Callable[..., T], *args: object) -> T:
        try:
            return fn(*args)
        except DatastoreError as exc:
            key = getattr(exc, "key", None)
            if isinstance(key, str) and key.startswith(self.prefix):
                exc.key = key[len(self.prefix) :]
                exc.args = tuple(
                    a.replace(key, exc.key) if isinstance(a, str) else a for a in exc.args
                )
            raise

    def create(self, key: str, value: str, ttl: float | None = None) -> KVPair:
        return self._strip(self._call(self.inner.create, self.prefix + key, value, ttl))

    def update(self, key: str, value: str, revision: int, ttl: float | None = None) -> KVPair:
        return self._strip(self._call(self.inner.update, self.prefix + key, value, revision, ttl))

    def apply(self, key: str, value: str, ttl: float | None = None) -> KVPair:
        return self._strip(self._call(self.inner.apply, self.prefix + key, value, ttl))

    def delete(self, key: str, revision: int | None = None) -> KVPair:
        return self._strip(self._call(self.inner.delete, self.prefix + key, revision))

    def get(self, key: str) -> KVPair:
        return self._strip(self._call(self.inner.get, self.prefix + key))

    def list(self, prefix: str) -> ListResult:
        result = self._call(self.inner.list, self.prefix + prefix)
        return ListResult([self._strip(p) for p in result.kvs], result.revision)

    def watch(self, prefix: str, revision: int) -> PrefixedWatch:
        start = max(revision, self.base_revision)
        return PrefixedWatch(self.inner.watch(self.prefix + prefix, start), self.prefix)

    def current_revision(self) -> int:
        return self.inner.current_revision()

    def compact(self, revision: int) -> None:
        self.inner.compact(revision)

    def close(self) -> None:
        self.inner.close()


def make_etcd_backend(endpoints: str, prefix_isolation: str) -> Backend:
    """An EtcdBackend on ``endpoints`` confined to keys under ``prefix_isolation``."""
    return PrefixedBackend(EtcdBackend(endpoints), prefix_isolation)
