"""Wake-ups for the local datastore's watch poller: inotify on the database's files, plus kicks.

A commit from another process leaves no message to subscribe to, so the poller used to check
``PRAGMA data_version`` every 2 ms: 1 ms of latency on average, more at p99 on a loaded host,
and 500 wake-ups a second on every watching process. Every commit writes the ``-wal`` file (or,
outside WAL mode, the database file), so an inotify watch on their directory, filtered to those
two names, says exactly when to look. Kicks (commits in this process, close) go through an
eventfd in the same ``poll``.

inotify is only a hint: the writer updates the WAL index (shared memory, which inotify does not
see) just after writing the frames, so a wake whose check finds no new version is followed by
quick re-checks for a short grace period; and if a check ever finds a commit that no event
announced (a filesystem without inotify, an overflowed queue), the caller goes back to plain
interval polling for good (``unreliable``).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import select
import struct
import time
from pathlib import Path

IN_MODIFY = 0x002
IN_CREATE = 0x100
IN_MOVED_TO = 0x080
IN_Q_OVERFLOW = 0x4000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of NUL-padded name

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def parse_events(data: bytes) -> list[tuple[int, bytes]]:
    """(mask, name) of each ``struct inotify_event`` in ``data``; a truncated tail is an
    error (the kernel only returns whole events)."""
    out = []
    offset = 0
    while offset < len(data):
        if offset + _EVENT.size > len(data):
            raise ValueError(f"truncated inotify event header at offset {offset}")
        _, mask, _, length = _EVENT.unpack_from(data, offset)
        offset += _EVENT.size
        if offset + length > len(data):
            raise ValueError(f"truncated inotify event name at offset {offset}")
        out.append((mask, data[offset : offset + length].rstrip(b"\0")))
        offset += length
    return out


class Waker:
    """Blocks in ``wait`` until a kick, a write to the database's files, or the timeout."""

    def __init__(self, db_path: Path) -> None:
        real = Path(os.path.realpath(db_path))
        self._names = {os.fsencode(real.name), os.fsencode(real.name + "-wal")}
        self._kick_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._inotify_fd = -1
        self.unreliable = False
        fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            self.unreliable = True
            return
        mask = IN_MODIFY | IN_CREATE | IN_MOVED_TO
        if _libc.inotify_add_watch(fd, os.fsencode(real.parent), mask) < 0:
            os.close(fd)
            self.unreliable = True
            return
        self._inotify_fd = fd

    def kick(self) -> None:
        if self._kick_fd < 0:
            return
        try:
            os.eventfd_write(self._kick_fd, 1)
        except OSError as exc:  # closed, or the counter is saturated: a wake is pending anyway
            if exc.errno not in (errno.EBADF, errno.EAGAIN):
                raise

    def wait(self, timeout: float) -> bool:
        """Sleep until woken or ``timeout`` s; True when the database's files were written."""
        # poll, not select: a process with many sockets (typha) may hold fds above FD_SETSIZE
        poller = select.poll()
        for fd in (self._kick_fd, self._inotify_fd):
            if fd >= 0:
                poller.register(fd, select.POLLIN)
        if 0 < timeout < 0.001:  # poll() rounds up to whole milliseconds; sleep is finer
            time.sleep(timeout)
            timeout = 0.0
        ready = {fd for fd, _ in poller.poll(max(timeout, 0.0) * 1000)}
        written = False
        if self._kick_fd in ready:
            with contextlib.suppress(BlockingIOError):
                os.eventfd_read(self._kick_fd)
        if self._inotify_fd in ready:
            written = self._drain()
        return written

    def _drain(self) -> bool:
        written = False
        while True:
            try:
                data = os.read(self._inotify_fd, 65536)
            except BlockingIOError:
                return written
            for mask, name in parse_events(data):
                if mask & IN_Q_OVERFLOW or name in self._names:
                    written = True

    def close(self) -> None:
        for fd in (self._inotify_fd, self._kick_fd):
            if fd >= 0:
                os.close(fd)
        self._inotify_fd = self._kick_fd = -1
