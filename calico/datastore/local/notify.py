"""Wake the local watch poller when the database file changes, instead of at its next tick.

Why: the poller checks ``PRAGMA data_version`` every ``poll_interval`` (2 ms), so a commit made
by another process waited 1 ms on average before any watch saw it, a third of the 3 ms
time-to-first-response target (design/performance.md "Felix"). A commit in WAL mode is a
``write`` to ``<db>-wal`` (a checkpoint writes ``<db>``), which inotify reports. The two files
are watched themselves, not their directory, so logs or status files next to the database
never wake the poller. A file that does not exist yet (no ``-wal`` before the first
connection) is watched from the first wait after it appears; until then the tick covers it.
The poll stays (inotify may be missing or not cover a network file system), but once both
files are watched on a local file system (``reliable``) the poller may wait far longer than
its 2 ms tick: at 500 wake-ups a second the tick alone cost a watching Felix ~8% of a core,
every wake-up taking the GIL from the threads on a new workload's path (design/performance.md
"TTFR at 100 policies: hand-overs"). A watch that is lost (the file deleted or replaced) or
added ends the wait, so a commit made to a new file before it was watched is still seen at
once. In-process kicks go through a pipe watched alongside.
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
IN_Q_OVERFLOW = 0x4000  # events were dropped: treat as a change
_MASK = IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF
_EVENT = struct.Struct("=iIII")  # wd, mask, cookie, len; then len bytes of NUL-padded name
# statfs f_type of the local file systems whose writes inotify sees (any process, this host):
# ext2/3/4, xfs, btrfs, tmpfs, overlayfs, f2fs, zfs, ramfs, bcachefs. Anything else (NFS, CIFS,
# FUSE, ...) keeps the short tick.
LOCAL_FS_TYPES = frozenset(
    {0xEF53, 0x58465342, 0x9123683E, 0x01021994, 0x794C7630, 0xF2F52010, 0x2FC12FC1,
     0x858458F6, 0xCA451A4E}
)  # fmt: skip


def filesystem_type(libc: object, path: bytes) -> int | None:
    """statfs(2)'s ``f_type`` of the file system holding ``path`` (None if it fails). glibc's
    ``struct statfs`` starts with ``f_type`` (a C long) on every Linux ABI."""
    import ctypes

    buf = ctypes.create_string_buffer(512)  # larger than any ABI's struct statfs
    if libc.statfs(path, buf) != 0:  # type: ignore[attr-defined]
        return None
    return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF


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
        self._local_fs = False
        import ctypes  # here: only a watch needs it, and a one-shot read should not pay ~2 ms

        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd >= 0:
                self._libc, self._inotify = libc, fd
                parent = os.path.dirname(self._paths[0]) or b"."
                self._local_fs = filesystem_type(libc, parent) in LOCAL_FS_TYPES
        self._kick_r, self._kick_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._closed = False
        self._watch_files()

    @property
    def watching_files(self) -> bool:
        """True once at least one of the two files is watched."""
        return bool(self._wds)

    @property
    def reliable(self) -> bool:
        """Both files watched, on a local file system: every commit ends a wait."""
        return self._local_fs and len(self._wds) == len(self._paths)

    def _watch_files(self) -> bool:
        """Watch the files not watched yet; True if a watch was added."""
        if self._inotify is None or len(self._wds) == len(self._paths):
            return False
        added = False
        for path in self._paths:
            if path not in self._wds:
                wd = self._libc.inotify_add_watch(self._inotify, path, _MASK)  # type: ignore[union-attr]
                if wd >= 0:
                    self._wds[path] = wd
                    added = True
        return added

    def kick(self) -> None:
        with contextlib.suppress(BlockingIOError):  # a full pipe: a wake-up is pending anyway
            os.write(self._kick_w, b"k")

    def wait(self, timeout: float, *, reliable_timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (``reliable_timeout`` instead, if given, while
        ``reliable``); True if woken early by a change, a kick, or a watch added or lost (the
        file may have been written before it was watched)."""
        had_watches = bool(self._wds)
        if self._watch_files() and had_watches:
            return True  # a file that appeared or was replaced: look at it now
        if reliable_timeout is not None and self.reliable:
            timeout = reliable_timeout
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
                        woken = True  # and look now: no tick may be coming soon
                    woken = woken or bool(mask & (IN_MODIFY | IN_CLOSE_WRITE | IN_Q_OVERFLOW))
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
