"""Wake the local watch poller when the database file changes, instead of at its next tick.

Why: the poller checks ``PRAGMA data_version`` every ``poll_interval`` (2 ms), so a commit made
by another process waited 1 ms on average before any watch saw it, a third of the 3 ms
time-to-first-response target (design/performance.md "Felix"). A commit in WAL mode is a
``write`` to ``<db>-wal`` (a checkpoint writes ``<db>``), which inotify reports. The two files
are watched themselves, not their directory, so logs or status files next to the database
never wake the poller. A file that does not exist yet (no ``-wal`` before the first
connection) is watched from the first wait after it appears; until then the tick covers it.
The poll stays as it was (inotify may be missing or not cover a network file system); this
only ends a wait early. In-process kicks go through a pipe watched alongside.
"""

from __future__ import annotations

import contextlib
import os
import select
import struct
import time
from pathlib import Path

IN_MODIFY, IN_CLOSE_WRITE, IN_DELETE_SELF, IN_MOVE_SELF = 0x2, 0x8, 0x400, 0x800
IN_IGNORED = 0x8000  # the watch is gone (file deleted, or the watch removed)
_MASK = IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF
_EVENT = struct.Struct("=iIII")  # wd, mask, cookie, len; then len bytes of NUL-padded name


def parse_events(buf: bytes) -> list[tuple[int, int]]:
    """``(watch descriptor, mask)`` of each event in a buffer read from an inotify fd."""
    events, offset = [], 0
    while offset + _EVENT.size <= len(buf):
        wd, mask, _cookie, length = _EVENT.unpack_from(buf, offset)
        events.append((wd, mask))
        offset += _EVENT.size + length
    return events


class ChangeNotifier:
    """``wait(timeout)`` returns early when the database (or its WAL) is written, or on
    ``kick()``. Owned by the poller thread, except ``kick`` (any thread) and ``close``."""

    def __init__(self, path: Path) -> None:
        self._paths = [os.fsencode(f"{path}{suffix}") for suffix in ("", "-wal")]
        self._wds: dict[bytes, int] = {}  # path -> watch descriptor, for the files watched
        self._libc, self._inotify = None, None
        import ctypes  # here: only a watch needs it, and a one-shot read should not pay ~2 ms

        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd >= 0:
                self._libc, self._inotify = libc, fd
        self._kick_r, self._kick_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._closed = False
        self._watch_files()

    @property
    def watching_files(self) -> bool:
        """True once at least one of the two files is watched."""
        return bool(self._wds)

    def _watch_files(self) -> None:
        if self._inotify is None or len(self._wds) == len(self._paths):
            return
        for path in self._paths:
            if path not in self._wds:
                wd = self._libc.inotify_add_watch(self._inotify, path, _MASK)  # type: ignore[union-attr]
                if wd >= 0:
                    self._wds[path] = wd

    def kick(self) -> None:
        with contextlib.suppress(BlockingIOError):  # a full pipe: a wake-up is pending anyway
            os.write(self._kick_w, b"k")

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds; True if woken early by a change or a kick."""
        self._watch_files()
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
                if fd == self._kick_r:
                    woken = True
                    continue
                for wd, mask in parse_events(data):
                    if mask & IN_IGNORED:  # deleted or replaced: watch it again when it is back
                        self._wds = {p: w for p, w in self._wds.items() if w != wd}
                    woken = woken or bool(mask & (IN_MODIFY | IN_CLOSE_WRITE))
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
