"""Wake the local watch poller when the database file changes, instead of at its next tick.

Why: the poller checks ``PRAGMA data_version`` every ``poll_interval`` (2 ms), so a commit made
by another process waited 1 ms on average before any watch saw it, a third of the 3 ms
time-to-first-response target (design/performance.md "Felix"). A commit in WAL mode is a
``write`` to ``<db>-wal`` (a checkpoint writes ``<db>``), which inotify reports on the
directory. The poll stays as it was (inotify may be missing or not cover a network file
system); this only ends a wait early. In-process kicks go through a pipe watched alongside.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import struct
import time
from pathlib import Path

IN_MODIFY, IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE = 0x2, 0x8, 0x80, 0x100
_MASK = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE
_EVENT = struct.Struct("=iIII")  # wd, mask, cookie, len; then len bytes of NUL-padded name


def _inotify(directory: Path) -> int | None:
    """An inotify fd on ``directory`` (non-blocking), or None where there is none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    if libc.inotify_add_watch(fd, os.fsencode(directory), _MASK) < 0:
        os.close(fd)
        return None
    return fd


def changed_names(buf: bytes) -> set[bytes]:
    """The file names in a buffer of inotify events."""
    names, offset = set(), 0
    while offset + _EVENT.size <= len(buf):
        _wd, _mask, _cookie, length = _EVENT.unpack_from(buf, offset)
        start = offset + _EVENT.size
        names.add(buf[start : start + length].rstrip(b"\0"))
        offset = start + length
    return names


class ChangeNotifier:
    """``wait(timeout)`` returns early when the database (or its WAL) is written, or on
    ``kick()``. Owned by the poller thread, except ``kick`` (any thread) and ``close``."""

    def __init__(self, path: Path) -> None:
        self._names = {os.fsencode(path.name + suffix) for suffix in ("", "-wal")}
        self._inotify = _inotify(path.parent)
        self._kick_r, self._kick_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._closed = False

    @property
    def watching_files(self) -> bool:
        return self._inotify is not None

    def kick(self) -> None:
        with contextlib.suppress(BlockingIOError):  # a full pipe: a wake-up is pending anyway
            os.write(self._kick_w, b"k")

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds; True if woken early by a change or a kick (writes
        to other files in the directory do not end the wait)."""
        fds = [self._kick_r] if self._inotify is None else [self._kick_r, self._inotify]
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                ready, _, _ = select.select(fds, [], [], remaining)
            except (OSError, ValueError):
                return False  # closed under us: the poller is stopping
            woken = False
            for fd in ready:
                try:
                    data = os.read(fd, 1 << 16)
                except OSError:
                    continue
                woken = woken or fd == self._kick_r or bool(changed_names(data) & self._names)
            if woken:
                return True
        return False

    def close(self) -> None:
        """Once; the owner makes sure nothing calls ``kick`` or ``wait`` afterwards."""
        if self._closed:
            return
        self._closed = True
        for fd in (self._inotify, self._kick_r, self._kick_w):
            if fd is not None:
                os.close(fd)
        self._inotify = None
