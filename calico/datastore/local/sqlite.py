"""SQLite plumbing for the local datastore: opening files safely, mapping errors, retrying locks.

Every sqlite3 error leaves this package as a DatastoreError naming the file, so a user who sees
"cannot open local datastore /var/lib/calico/calico.db: file is not a database" knows which file
to look at. Nothing here ever deletes or recreates an existing file.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypeVar
from urllib.parse import quote

from calico.datastore.errors import ConnectionFailedError, DatastoreError

T = TypeVar("T")

Synchronous = Literal["NORMAL", "FULL"]

# Each attempt waits this long inside SQLite's busy handler; ``retry_busy`` retries attempts
# until RETRY_DEADLINE, so a writer only gives up when the lock is held pathologically long.
BUSY_TIMEOUT = 5.0
RETRY_DEADLINE = 60.0

_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6


def is_busy(exc: BaseException) -> bool:
    """True for SQLITE_BUSY/SQLITE_LOCKED (and their extended codes): retryable contention."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def wrap_error(path: Path, exc: sqlite3.Error, opening: bool = False) -> DatastoreError:
    """A DatastoreError naming ``path``; opening failures are ConnectionFailedError."""
    if isinstance(exc, sqlite3.ProgrammingError) and "closed" in str(exc):
        return DatastoreError(f"local datastore {path} is closed")
    if opening:
        return ConnectionFailedError(f"cannot open local datastore {path}: {exc}")
    return DatastoreError(f"local datastore {path}: {exc}")


def retry_busy(fn: Callable[[], T], deadline: float = RETRY_DEADLINE) -> T:
    """Run ``fn`` again while SQLite reports lock contention, with a small jittered backoff."""
    give_up = time.monotonic() + deadline
    delay = 0.001
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= give_up:
                raise
        # Jitter from the pid and clock keeps many processes from retrying in lockstep.
        time.sleep(delay * (1 + (os.getpid() + time.perf_counter_ns()) % 7 / 7))
        delay = min(delay * 2, 0.05)


def create_file(path: Path) -> None:
    """Create the parent directories and an empty 0600 file if ``path`` does not exist yet.

    SQLite gives its -wal and -shm files the main file's mode, so they end up 0600 too.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    except OSError as exc:
        raise ConnectionFailedError(f"cannot open local datastore {path}: {exc}") from exc
    os.close(fd)


def connect(path: Path, synchronous: Synchronous) -> sqlite3.Connection:
    """Open one connection in WAL mode; the file must already exist (see ``create_file``)."""
    try:
        conn = sqlite3.connect(
            f"file:{quote(str(path))}?mode=rw",  # rw: never create; create_file did
            uri=True,
            timeout=BUSY_TIMEOUT,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            check_same_thread=False,  # close() may run on another thread
        )
    except sqlite3.Error as exc:
        raise wrap_error(path, exc, opening=True) from exc
    try:
        mode = retry_busy(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        if str(mode).lower() != "wal":
            raise ConnectionFailedError(
                f"cannot open local datastore {path}: WAL mode unavailable (got {mode})"
            )
        conn.execute(f"PRAGMA synchronous={synchronous}")
    except sqlite3.Error as exc:
        conn.close()
        raise wrap_error(path, exc, opening=True) from exc
    except BaseException:
        conn.close()
        raise
    return conn
