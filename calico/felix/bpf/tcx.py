"""TCX attach (kernel 6.6+): one BPF link per interface and direction, pinned in bpffs.

Raw ``bpf(2)`` commands through ctypes: the system libbpf (1.1) predates
``bpf_program__attach_tcx``. A link is created without ordering flags and pinned as
``<link_dir>/<iface without dots>_<ingress|egress>`` (upstream's name); a re-attach updates
the pinned link's program in place (atomic for packets, no gap), re-creating the link only if
the update fails. The kernel resolves ifindexes in the calling thread's network namespace, so
every call runs on a thread inside ``netns`` when one is given (tests drive a namespace from
outside it). Design: design/felix-bpf.md "Attach".
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import struct
import threading
from collections.abc import Callable
from typing import TypeVar

from calico.felix.bpf.libbpf import BPFError, lib

BPF_OBJ_PIN, BPF_OBJ_GET, BPF_PROG_QUERY = 6, 7, 16
BPF_LINK_CREATE, BPF_LINK_UPDATE, BPF_LINK_GET_FD_BY_ID, BPF_LINK_DETACH = 28, 29, 30, 34
ATTACH_TYPES = {"ingress": 46, "egress": 47}  # BPF_TCX_INGRESS, BPF_TCX_EGRESS
_SYS_BPF = {"x86_64": 321, "aarch64": 280}
_ATTR_SIZE = 128  # a zeroed bpf_attr prefix: the kernel checks unused tail bytes are zero
CLONE_NEWNET = 0x40000000
MIN_KERNEL = (6, 6)

_libc = ctypes.CDLL(None, use_errno=True)
T = TypeVar("T")


def supported() -> bool:
    """TCX exists from Linux 6.6 (and on the architectures we know the syscall number of)."""
    if platform.machine() not in _SYS_BPF:
        return False
    parts = platform.release().split("-", 1)[0].split(".")
    try:
        return (int(parts[0]), int(parts[1])) >= MIN_KERNEL
    except (IndexError, ValueError):
        return False


def _bpf(cmd: int, attr: bytes) -> int:
    buf = ctypes.create_string_buffer(attr.ljust(_ATTR_SIZE, b"\0"), _ATTR_SIZE)
    rc = _libc.syscall(_SYS_BPF.get(platform.machine(), -1), cmd, buf, _ATTR_SIZE)
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(rc)


def _in_netns(netns: str | None, fn: Callable[[], T]) -> T:
    """Run ``fn`` on a thread inside ``netns`` (setns moves only the calling thread)."""
    if netns is None:
        return fn()
    box: dict[str, object] = {}

    def run() -> None:
        try:
            fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns({netns}): {os.strerror(err)}")
            finally:
                os.close(fd)
            box["value"] = fn()
        except BaseException as e:  # re-raised on the caller's thread
            box["error"] = e

    t = threading.Thread(target=run, name=f"tcx-{netns}")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def pin_path(link_dir: str, iface: str, direction: str) -> str:
    return os.path.join(link_dir, f"{iface.replace('.', '')}_{direction}")


def _obj_pin(fd: int, path: str) -> None:
    p = ctypes.create_string_buffer(path.encode())
    _bpf(BPF_OBJ_PIN, struct.pack("<QII", ctypes.addressof(p), fd, 0))


def _obj_get(path: str) -> int:
    p = ctypes.create_string_buffer(path.encode())
    return _bpf(BPF_OBJ_GET, struct.pack("<QII", ctypes.addressof(p), 0, 0))


def _attach_one(ifindex: int, prog_fd: int, direction: str, pin: str) -> None:
    if os.path.exists(pin):
        fd = _obj_get(pin)
        try:
            _bpf(BPF_LINK_UPDATE, struct.pack("<IIII", fd, prog_fd, 0, 0))
            return
        except OSError:
            os.unlink(pin)  # a defunct link (its interface went): make a new one
        finally:
            os.close(fd)
    fd = _bpf(BPF_LINK_CREATE, struct.pack("<IIII", prog_fd, ifindex, ATTACH_TYPES[direction], 0))
    try:
        _obj_pin(fd, pin)
    finally:
        os.close(fd)


def attach(
    ifindex: int, iface: str, fds: dict[str, int], link_dir: str, netns: str | None = None
) -> None:
    """Attach direction -> program fd on ``ifindex`` (named ``iface``) as pinned links."""
    os.makedirs(link_dir, mode=0o700, exist_ok=True)

    def run() -> None:
        for direction, fd in fds.items():
            _attach_one(ifindex, fd, direction, pin_path(link_dir, iface, direction))

    try:
        _in_netns(netns, run)
    except OSError as e:
        raise BPFError(f"TCX attach to {iface} failed: {e}") from e


def _query(ifindex: int, direction: str) -> tuple[list[int], list[int]]:
    """(program ids, link ids) attached to the interface's TCX hook, in order."""
    progs, links = (ctypes.c_uint32 * 64)(), (ctypes.c_uint32 * 64)()
    attr = bytearray(64)
    struct.pack_into("<II", attr, 0, ifindex, ATTACH_TYPES[direction])
    struct.pack_into("<Q", attr, 16, ctypes.addressof(progs))
    struct.pack_into("<I", attr, 24, 64)
    struct.pack_into("<Q", attr, 40, ctypes.addressof(links))
    buf = ctypes.create_string_buffer(bytes(attr).ljust(_ATTR_SIZE, b"\0"), _ATTR_SIZE)
    rc = _libc.syscall(_SYS_BPF.get(platform.machine(), -1), BPF_PROG_QUERY, buf, _ATTR_SIZE)
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    (count,) = struct.unpack_from("<I", buf.raw, 24)
    return list(progs[:count]), list(links[:count])


def _prog_name(prog_id: int) -> str:
    fd = lib().bpf_prog_get_fd_by_id(prog_id)
    if fd < 0:
        return ""
    try:
        info = ctypes.create_string_buffer(240)
        n = ctypes.c_uint32(240)
        if lib().bpf_obj_get_info_by_fd(fd, info, ctypes.byref(n)):
            return ""
        return info.raw[64:80].split(b"\0", 1)[0].decode()
    finally:
        os.close(fd)


def programs(ifindex: int, netns: str | None = None) -> dict[str, list[tuple[str, int]]]:
    """direction -> [(program name, program id)] on the interface's TCX hooks."""

    def run() -> dict[str, list[tuple[str, int]]]:
        out = {}
        for direction in ATTACH_TYPES:
            try:
                ids, _ = _query(ifindex, direction)
            except OSError:
                ids = []
            out[direction] = [(_prog_name(i), i) for i in ids]
        return out

    return _in_netns(netns, run)


def detach(
    ifindex: int | None, iface: str, link_dir: str, ours: tuple[str, ...], netns: str | None = None
) -> int:
    """Detach and unpin our links on ``iface``: the pinned ones, then any link on its hooks
    running one of ``ours`` (a predecessor whose pins are gone). Returns how many went."""

    def run() -> int:
        n = 0
        for direction in ATTACH_TYPES:
            pin = pin_path(link_dir, iface, direction)
            if os.path.exists(pin):
                with contextlib.suppress(OSError):
                    fd = _obj_get(pin)
                    try:
                        _bpf(BPF_LINK_DETACH, struct.pack("<I", fd))
                        n += 1
                    finally:
                        os.close(fd)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(pin)
            if ifindex is None:
                continue
            try:
                ids, links = _query(ifindex, direction)
            except OSError:
                continue
            for prog_id, link_id in zip(ids, links, strict=False):
                if not link_id or _prog_name(prog_id) not in ours:
                    continue
                with contextlib.suppress(OSError):
                    fd = _bpf(BPF_LINK_GET_FD_BY_ID, struct.pack("<III", link_id, 0, 0))
                    try:
                        _bpf(BPF_LINK_DETACH, struct.pack("<I", fd))
                        n += 1
                    finally:
                        os.close(fd)
        return n

    return _in_netns(netns, run)
