"""Bulk compare-and-swap writes for the resync passes (design/kube-controllers.md
"Measured").

A resync of a big cluster writes thousands of independent objects (label sync, pod labels
onto endpoints). When the backend can swap many keys in one transaction (etcd's
``update_many``), writes go in chunks of its limit, a few chunks in parallel; a chunk that
fails its compare (someone else wrote one of its keys) is retried key by key so only the
raced keys are left to the next pass. Other backends get one CAS ``update`` per key.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from calico.datastore import Backend
from calico.datastore.errors import (
    DatastoreError,
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
    UpdateConflictError,
)

log = logging.getLogger(__name__)

Write = tuple[str, str, int]  # key, new value, revision it must still be at
WORKERS = 16
CHUNK_WORKERS = 4
_SOFT = (UpdateConflictError, ResourceDoesNotExistError, ResourceAlreadyExistsError)


def cas_write_all(backend: Backend, writes: Sequence[Write], who: str) -> int:
    """Write every ``(key, value, revision)`` with CAS; returns how many were written."""
    many = getattr(backend, "update_many", None)
    if many is None:
        with ThreadPoolExecutor(WORKERS) as pool:
            return sum(pool.map(lambda w: _one(backend, w, who), writes))
    size = int(getattr(backend, "MAX_TXN_OPS", 64) or 64)
    chunks = [list(writes[i : i + size]) for i in range(0, len(writes), size)]

    def chunk(batch: list[Write]) -> int:
        try:
            if many(batch):
                return len(batch)
        except DatastoreError as exc:
            log.info("%s: bulk write failed (%s); writing one by one", who, exc)
        return sum(_one(backend, w, who) for w in batch)

    with ThreadPoolExecutor(CHUNK_WORKERS) as pool:
        return sum(pool.map(chunk, chunks))


def _one(backend: Backend, write: Write, who: str) -> int:
    try:
        backend.update(*write)
        return 1
    except _SOFT as exc:  # raced with another writer: the next pass settles it
        log.info("%s: %s changed meanwhile; next pass retries (%s)", who, write[0], exc)
    except DatastoreError as exc:
        log.warning("%s: write of %s failed: %s", who, write[0], exc)
    return 0
