"""Bulk CAS writes (calico.kube_controllers.writes) on a real etcd: chunks of the backend's
limit in one transaction each; a chunk with one raced key falls back to key-by-key, so
exactly the raced key is left; a backend without ``update_many`` writes one by one."""

from __future__ import annotations

import uuid
from typing import Any

from calico.datastore.etcd import EtcdBackend
from calico.kube_controllers.writes import cas_write_all


class _NoBulk:
    """The same backend seen without ``update_many`` (like any non-etcd backend)."""

    def __init__(self, inner: EtcdBackend) -> None:
        self.inner = inner

    def update(self, *args: Any) -> Any:
        return self.inner.update(*args)


def test_chunks_fallback_and_plain_backends(etcd_server: Any) -> None:
    prefix = f"/kcw-{uuid.uuid4().hex[:8]}/"
    backend = EtcdBackend(etcd_server.endpoints)
    try:
        n = backend.MAX_TXN_OPS * 2 + 5
        kvs = [backend.create(f"{prefix}{i:04d}", "old") for i in range(n)]
        raced = backend.update(kvs[70].key, "theirs", kvs[70].revision)  # in the second chunk
        writes = [(kv.key, "ours", kv.revision) for kv in kvs]
        assert cas_write_all(backend, writes, "test") == n - 1
        values = {kv.key: backend.get(kv.key).value for kv in kvs}
        assert values[raced.key] == "theirs"
        assert {v for k, v in values.items() if k != raced.key} == {"ours"}
        revisions = {backend.get(kv.key).revision for kv in kvs[: backend.MAX_TXN_OPS]}
        assert len(revisions) == 1  # the first chunk went in one transaction

        current = [backend.get(kv.key) for kv in kvs[:10]]
        plain = [(kv.key, "plain", kv.revision) for kv in current]
        plain[3] = (plain[3][0], "plain", kvs[3].revision)  # stale
        assert cas_write_all(_NoBulk(backend), plain, "test") == 9  # type: ignore[arg-type]
        assert backend.get(kvs[3].key).value == "ours"
    finally:
        backend.close()
