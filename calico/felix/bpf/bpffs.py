"""bpffs: is a directory a BPF filesystem, mount one there, and the kernel capability check.

Felix mounts bpffs on ``/sys/fs/bpf`` when nothing is mounted there (upstream's
MaybeMountBPFfs); tests mount a private instance on a temporary directory (each bpffs mount is
its own instance, so pins there are invisible to everyone else) and unmount it afterwards.
"""

from __future__ import annotations

import ctypes
import os
import platform

BPF_FS_MAGIC = 0xCAFE4A11
MIN_KERNEL = (5, 3)  # upstream's gate for the default distribution

_libc = ctypes.CDLL(None, use_errno=True)


class _Statfs(ctypes.Structure):
    _fields_ = [("f_type", ctypes.c_long), ("rest", ctypes.c_byte * 112)]


class BPFUnavailable(Exception):
    """The kernel or bpffs cannot run the BPF dataplane; the message says why."""


def is_bpffs(path: str) -> bool:
    buf = _Statfs()
    if _libc.statfs(path.encode(), ctypes.byref(buf)) != 0:
        return False
    return (buf.f_type & 0xFFFFFFFF) == BPF_FS_MAGIC


def mount_bpffs(path: str) -> None:
    """Mount a bpffs instance on ``path`` (created if missing); no-op if one is there."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    if is_bpffs(path):
        return
    if _libc.mount(b"bpf", path.encode(), b"bpf", 0, None) != 0:
        err = ctypes.get_errno()
        raise BPFUnavailable(f"cannot mount bpffs on {path}: {os.strerror(err)}")


def unmount(path: str) -> None:
    if _libc.umount2(path.encode(), 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"umount {path}: {os.strerror(err)}")


def kernel_version(release: str | None = None) -> tuple[int, int]:
    text = release or platform.release()
    parts = text.split("-", 1)[0].split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise BPFUnavailable(f"cannot parse kernel release {text!r}") from None


def check_kernel(release: str | None = None) -> None:
    """Raise BPFUnavailable unless the kernel is at least :data:`MIN_KERNEL` and little-endian."""
    import sys

    if sys.byteorder != "little":
        raise BPFUnavailable("the BPF dataplane needs a little-endian host")
    have = kernel_version(release)
    if have < MIN_KERNEL:
        want = ".".join(map(str, MIN_KERNEL))
        raise BPFUnavailable(f"kernel {have[0]}.{have[1]} is older than {want}")
