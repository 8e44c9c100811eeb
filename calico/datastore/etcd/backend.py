"""EtcdBackend: the Backend protocol on etcd v3 (KV, Txn, Watch and Lease over gRPC)."""

from __future__ import annotations

import contextlib
import math
import threading
import weakref
from collections.abc import Sequence
from typing import Unpack

from calico.datastore.backend import KVPair, ListResult
from calico.datastore.errors import (
    DatastoreError,
    InvalidValueError,
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
    RevisionCompactedError,
    UpdateConflictError,
)
from calico.datastore.etcd.connection import Connection, ConnectionOptions
from calico.datastore.etcd.keys import encode, pairs, prefix_range, to_pair
from calico.datastore.etcd.watch import EtcdWatch
from calico.datastore.gcdefer import deferred
from calico.proto.etcd import rpc_pb2

Compare = rpc_pb2.Compare

# Keys per Range page; the list stays at one pinned revision. Pages ask for no sort order: etcd
# returns a range in key order anyway, and a sorted request makes etcd 3.4 read the whole rest of
# the range for every page before truncating it (10,000-key pages of 100,000 keys cost 3.7x one
# Range sorted, 1.2x unsorted; design/performance.md "Datastore listing").
LIST_PAGE_SIZE = 100_000


def _check_key(key: str) -> bytes:
    if not isinstance(key, str) or not key:
        raise InvalidValueError(f"invalid key {key!r}: keys are non-empty strings")
    try:
        return encode(key)
    except UnicodeEncodeError as exc:
        raise InvalidValueError(f"invalid key {key!r}: {exc}") from exc


def _check_write(key: str, value: str, ttl: float | None) -> bytes:
    k = _check_key(key)
    if not isinstance(value, str):
        raise InvalidValueError(f"invalid value for {key}: expected JSON text, got {type(value)}")
    if ttl is not None and not ttl > 0:
        raise InvalidValueError(f"invalid ttl for {key}: {ttl!r} (must be > 0 seconds)")
    return k


def _op_put(key: bytes, value: str, lease: int) -> rpc_pb2.RequestOp:
    return rpc_pb2.RequestOp(
        request_put=rpc_pb2.PutRequest(key=key, value=encode(value), lease=lease)
    )


def _op_get(key: bytes) -> rpc_pb2.RequestOp:
    return rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=key))


def _exists(key: bytes) -> rpc_pb2.Compare:
    return Compare(result=Compare.GREATER, target=Compare.CREATE, key=key, create_revision=0)


def _absent(key: bytes) -> rpc_pb2.Compare:
    return Compare(result=Compare.EQUAL, target=Compare.CREATE, key=key, create_revision=0)


def _at(key: bytes, revision: int) -> rpc_pb2.Compare:
    return Compare(result=Compare.EQUAL, target=Compare.MOD, key=key, mod_revision=revision)


class EtcdBackend:
    """Keys and values stored verbatim in etcd; ``revision`` is etcd's mod revision.

    ``endpoints`` is a list or a comma-separated string of ``http(s)://host:port`` URLs; calls
    go to the last endpoint that worked and fail over to the next on connection failure. TLS is
    used for ``https`` endpoints or when any of the key/cert/CA files is given.
    """

    MAX_TXN_OPS = 64  # update_many's limit (etcd's default --max-txn-ops is 128)

    def __init__(
        self, endpoints: Sequence[str] | str, **options: Unpack[ConnectionOptions]
    ) -> None:
        self._conn = Connection(endpoints, **options)
        self._watches: weakref.WeakSet[EtcdWatch] = weakref.WeakSet()
        self._watches_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"EtcdBackend({self._conn.description!r})"

    @property
    def endpoints(self) -> list[str]:
        return [e.url for e in self._conn.endpoints]

    # -- writes ---------------------------------------------------------------------------------

    def create(self, key: str, value: str, ttl: float | None = None) -> KVPair:
        k = _check_write(key, value, ttl)
        lease = self._grant(ttl)
        txn = rpc_pb2.TxnRequest(compare=[_absent(k)], success=[_op_put(k, value, lease)])
        resp = self._txn("create", txn)
        if not resp.succeeded:
            self._revoke(lease)
            raise ResourceAlreadyExistsError(key)
        return KVPair(key, value, resp.header.revision, ttl)

    def update(self, key: str, value: str, revision: int, ttl: float | None = None) -> KVPair:
        k = _check_write(key, value, ttl)
        lease = self._grant(ttl)
        txn = rpc_pb2.TxnRequest(
            compare=[_exists(k), _at(k, revision)],
            success=[_op_put(k, value, lease)],
            failure=[_op_get(k)],
        )
        resp = self._txn("update", txn)
        if not resp.succeeded:
            self._revoke(lease)
            self._raise_cas_failure(key, revision, resp)
        return KVPair(key, value, resp.header.revision, ttl)

    def update_many(self, writes: Sequence[tuple[str, str, int]]) -> bool:
        """Compare-and-swap several keys in ONE transaction (bulk writers: kube-controllers'
        resync). Each ``(key, value, revision)`` must still be at ``revision``; if any is
        not, nothing is written and False is returned (the caller falls back to
        :meth:`update` per key to learn which). At most ``MAX_TXN_OPS`` writes (etcd's
        default ``--max-txn-ops`` is 128); no TTLs."""
        if len(writes) > self.MAX_TXN_OPS:
            raise ValueError(
                f"at most {self.MAX_TXN_OPS} writes per transaction, got {len(writes)}"
            )
        compare, success = [], []
        for key, value, revision in writes:
            k = _check_write(key, value, None)
            if revision <= 0:
                raise ValueError(f"update_many needs the current revision of {key}")
            compare.append(_at(k, revision))  # a non-zero mod revision implies the key exists
            success.append(_op_put(k, value, 0))
        if not writes:
            return True
        resp = self._txn("update", rpc_pb2.TxnRequest(compare=compare, success=success))
        return bool(resp.succeeded)

    def apply(self, key: str, value: str, ttl: float | None = None) -> KVPair:
        k = _check_write(key, value, ttl)
        lease = self._grant(ttl)
        req = rpc_pb2.PutRequest(key=k, value=encode(value), lease=lease)
        resp = self._conn.call("apply", lambda s, t: s.kv.Put(req, timeout=t))
        return KVPair(key, value, resp.header.revision, ttl)

    def delete(self, key: str, revision: int | None = None) -> KVPair:
        k = _check_key(key)
        delete = rpc_pb2.DeleteRangeRequest(key=k, prev_kv=True)
        if revision is None:
            resp = self._conn.call("delete", lambda s, t: s.kv.DeleteRange(delete, timeout=t))
            if not resp.prev_kvs:
                raise ResourceDoesNotExistError(key)
            return to_pair(resp.prev_kvs[0])
        txn = rpc_pb2.TxnRequest(
            compare=[_exists(k), _at(k, revision)],
            success=[rpc_pb2.RequestOp(request_delete_range=delete)],
            failure=[_op_get(k)],
        )
        tresp = self._txn("delete", txn)
        if not tresp.succeeded:
            self._raise_cas_failure(key, revision, tresp)
        deleted = tresp.responses[0].response_delete_range
        if not deleted.prev_kvs:  # cannot happen after the compare, but stay honest
            raise ResourceDoesNotExistError(key)
        return to_pair(deleted.prev_kvs[0])

    # -- reads ----------------------------------------------------------------------------------

    def get(self, key: str) -> KVPair:
        req = rpc_pb2.RangeRequest(key=_check_key(key))
        resp = self._conn.call("get", lambda s, t: s.kv.Range(req, timeout=t), read=True)
        if not resp.kvs:
            raise ResourceDoesNotExistError(key)
        kv = resp.kvs[0]
        return to_pair(kv, self._lease_ttls([kv.lease]).get(kv.lease))

    def list(self, prefix: str) -> ListResult:
        for attempt in range(3):
            try:
                return self._list_once(prefix)
            except RevisionCompactedError:  # the pinned revision went away between pages
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _list_once(self, prefix: str) -> ListResult:
        start, end = prefix_range(prefix)
        out: list[KVPair] = []
        revision = 0
        while True:
            req = rpc_pb2.RangeRequest(
                key=start, range_end=end, limit=LIST_PAGE_SIZE, revision=revision
            )
            resp = self._conn.call("list", lambda s, t, r=req: s.kv.Range(r, timeout=t), read=True)
            revision = revision or resp.header.revision
            with deferred():  # the KVPairs stay tracked: see calico.datastore.gcdefer
                out += pairs(resp.kvs)
            if not resp.more or not resp.kvs:
                break
            start = resp.kvs[-1].key + b"\0"
        leased = [i for i, kv in enumerate(out) if kv.ttl is not None]  # ttl holds the lease
        if leased:
            ttls = self._lease_ttls([int(out[i].ttl or 0) for i in leased])
            for i in leased:
                out[i] = out[i]._replace(ttl=ttls.get(int(out[i].ttl or 0)))
        return ListResult(out, revision)

    def current_revision(self) -> int:
        req = rpc_pb2.RangeRequest(key=b"\0", count_only=True)
        resp = self._conn.call("revision", lambda s, t: s.kv.Range(req, timeout=t), read=True)
        return resp.header.revision

    # -- watch and compaction -------------------------------------------------------------------

    def watch(self, prefix: str, revision: int) -> EtcdWatch:
        w = EtcdWatch(self._conn, prefix, max(revision, 0))
        with self._watches_lock:
            self._watches.add(w)
        return w

    def compact(self, revision: int) -> None:
        """Forget history at or below ``revision``.

        etcd's Compact(N) keeps revision N readable, so we compact at ``revision + 1`` (capped at
        the current revision, which etcd requires) to make ``watch(prefix, r)`` with
        ``r < revision`` fail "too old" exactly as the protocol says.
        """
        current = self.current_revision()
        if revision > current:
            raise DatastoreError(
                f"cannot compact etcd at {self._conn.description} to revision {revision}: "
                f"it is only at revision {current}"
            )
        target = min(revision + 1, current)
        if target <= 1:
            return
        req = rpc_pb2.CompactionRequest(revision=target)
        with contextlib.suppress(RevisionCompactedError):  # already compacted at/after target
            self._conn.call("compact", lambda s, t: s.kv.Compact(req, timeout=t))

    def close(self) -> None:
        with self._watches_lock:
            watches = list(self._watches)
        for w in watches:
            w.stop()
        self._conn.close()

    def __enter__(self) -> EtcdBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers --------------------------------------------------------------------------------

    def _txn(self, op: str, txn: rpc_pb2.TxnRequest) -> rpc_pb2.TxnResponse:
        return self._conn.call(op, lambda s, t: s.kv.Txn(txn, timeout=t))

    @staticmethod
    def _raise_cas_failure(key: str, revision: int, resp: rpc_pb2.TxnResponse) -> None:
        current = resp.responses[0].response_range.kvs if resp.responses else []
        if not current:
            raise ResourceDoesNotExistError(key)
        raise UpdateConflictError(
            key, f"revision {revision} is not the current revision {current[0].mod_revision}"
        )

    def _grant(self, ttl: float | None) -> int:
        """A new lease for a TTL write (etcd leases count whole seconds), or 0 for none."""
        if ttl is None:
            return 0
        req = rpc_pb2.LeaseGrantRequest(TTL=max(1, math.ceil(ttl)))
        return self._conn.call("lease grant", lambda s, t: s.lease.LeaseGrant(req, timeout=t)).ID

    def _revoke(self, lease: int) -> None:
        if not lease:
            return
        req = rpc_pb2.LeaseRevokeRequest(ID=lease)
        # Best effort: an unused lease expires on its own.
        with contextlib.suppress(Exception):
            self._conn.call("lease revoke", lambda s, t: s.lease.LeaseRevoke(req, timeout=t))

    def _lease_ttls(self, leases: Sequence[int]) -> dict[int, float]:
        """The granted TTL of each distinct live lease (TTL keys are rare: one call each).

        Like the local backend, reads report the TTL the key was written with (rounded up to
        whole seconds by etcd), not the time left.
        """
        out: dict[int, float] = {}
        for lease in set(leases) - {0}:
            req = rpc_pb2.LeaseTimeToLiveRequest(ID=lease)
            resp = self._conn.call(
                "lease ttl", lambda s, t, r=req: s.lease.LeaseTimeToLive(r, timeout=t), read=True
            )
            if resp.TTL >= 0:
                out[lease] = float(resp.grantedTTL)
        return out


__all__ = ["EtcdBackend"]
