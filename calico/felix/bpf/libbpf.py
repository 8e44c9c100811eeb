"""ctypes binding to the system ``libbpf.so.1``: open/load ELF objects, pinned maps, map I/O.

No bcc and no kernel headers: objects are compiled by clang (:mod:`calico.felix.bpf.build`) and
loaded here with maps pinned by name under a pin directory, so every object (the main programs
and each generated policy program) shares the same maps. Failures raise :class:`BPFError` with
libbpf's errno text, never a bare OSError.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator

BPF_ANY, BPF_NOEXIST, BPF_EXIST = 0, 1, 2


class BPFError(Exception):
    """A libbpf call failed (missing library, verifier rejection, missing pin, ...)."""


class _OpenOpts(ctypes.Structure):
    # struct bpf_object_open_opts up to pin_root_path; libbpf accepts a shorter ``sz``.
    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("object_name", ctypes.c_char_p),
        ("relaxed_maps", ctypes.c_bool),
        ("pin_root_path", ctypes.c_char_p),
    ]


class _TestRunOpts(ctypes.Structure):
    # struct bpf_test_run_opts (libbpf 1.x)
    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("data_in", ctypes.c_void_p),
        ("data_out", ctypes.c_void_p),
        ("data_size_in", ctypes.c_uint32),
        ("data_size_out", ctypes.c_uint32),
        ("ctx_in", ctypes.c_void_p),
        ("ctx_out", ctypes.c_void_p),
        ("ctx_size_in", ctypes.c_uint32),
        ("ctx_size_out", ctypes.c_uint32),
        ("retval", ctypes.c_uint32),
        ("repeat", ctypes.c_int),
        ("duration", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("cpu", ctypes.c_uint32),
        ("batch_size", ctypes.c_uint32),
    ]


_lib: ctypes.CDLL | None = None


def lib() -> ctypes.CDLL:
    """The loaded library with argtypes set; BPFError if libbpf is not installed."""
    global _lib
    if _lib is not None:
        return _lib
    try:
        handle = ctypes.CDLL("libbpf.so.1", use_errno=True)
    except OSError as e:
        raise BPFError(f"libbpf.so.1 not available: {e}") from None
    vp, cp, ci = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    sigs: dict[str, tuple[list[object], object]] = {
        "bpf_object__open_file": ([cp, ctypes.POINTER(_OpenOpts)], vp),
        "bpf_object__load": ([vp], ci),
        "bpf_object__close": ([vp], None),
        "bpf_object__find_program_by_name": ([vp, cp], vp),
        "bpf_program__fd": ([vp], ci),
        "bpf_object__find_map_by_name": ([vp, cp], vp),
        "bpf_map__fd": ([vp], ci),
        "libbpf_get_error": ([vp], ctypes.c_long),
        "bpf_obj_get": ([cp], ci),
        "bpf_map_update_elem": ([ci, vp, vp, ctypes.c_uint64], ci),
        "bpf_map_lookup_elem": ([ci, vp, vp], ci),
        "bpf_map_delete_elem": ([ci, vp], ci),
        "bpf_map_get_next_key": ([ci, vp, vp], ci),
        "bpf_prog_test_run_opts": ([ci, ctypes.POINTER(_TestRunOpts)], ci),
        "libbpf_num_possible_cpus": ([], ci),
        "bpf_prog_get_fd_by_id": ([ctypes.c_uint32], ci),
        "bpf_map_get_fd_by_id": ([ctypes.c_uint32], ci),
        "bpf_obj_get_info_by_fd": ([ci, vp, ctypes.POINTER(ctypes.c_uint32)], ci),
        "bpf_obj_pin": ([ci, cp], ci),
        "bpf_object__next_map": ([vp, vp], vp),
        "bpf_map__is_internal": ([vp], ctypes.c_bool),
        "bpf_map__name": ([vp], cp),
        "bpf_map__type": ([vp], ci),
        "bpf_map__key_size": ([vp], ctypes.c_uint32),
        "bpf_map__value_size": ([vp], ctypes.c_uint32),
        "bpf_map__max_entries": ([vp], ctypes.c_uint32),
        "bpf_map__map_flags": ([vp], ctypes.c_uint32),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(handle, name)
        fn.argtypes = args
        fn.restype = res
    _lib = handle
    return handle


def _errno_text(rc: int) -> str:
    err = -rc if rc < 0 else ctypes.get_errno()
    return f"{os.strerror(err)} (errno {err})"


class LoadedObject:
    """A loaded BPF object; program fds stay valid until :meth:`close`."""

    def __init__(self, path: str, pin_root: str) -> None:
        self.path = path
        lb = lib()
        opts = _OpenOpts(
            sz=ctypes.sizeof(_OpenOpts), pin_root_path=pin_root.encode(), relaxed_maps=False
        )
        obj = lb.bpf_object__open_file(path.encode(), ctypes.byref(opts))
        if not obj or lb.libbpf_get_error(obj):
            raise BPFError(f"cannot open BPF object {path}: {_errno_text(-ctypes.get_errno())}")
        rc = lb.bpf_object__load(obj)
        if rc:
            lb.bpf_object__close(obj)
            raise BPFError(f"cannot load BPF object {path}: {_errno_text(rc)}")
        self._obj: int | None = obj

    def program_fd(self, name: str) -> int:
        lb = lib()
        prog = lb.bpf_object__find_program_by_name(self._obj, name.encode())
        if not prog:
            raise BPFError(f"no program {name!r} in {self.path}")
        return int(lb.bpf_program__fd(prog))

    def close(self) -> None:
        if self._obj is not None:
            lib().bpf_object__close(self._obj)
            self._obj = None


class PinnedMap:
    """A map opened from its bpffs pin, with fixed key/value sizes for raw byte I/O."""

    def __init__(self, path: str, key_size: int, value_size: int, fd: int | None = None) -> None:
        """``fd``: an already open map (found by id, ``calico.felix.bpf.maps.Maps.discover``);
        ``path`` is then only its name in messages."""
        self.path, self.key_size, self.value_size = path, key_size, value_size
        if fd is None:
            fd = lib().bpf_obj_get(path.encode())
            if fd < 0:
                raise BPFError(f"cannot open pinned map {path}: {_errno_text(fd)}")
        self.fd = fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _key(self, key: bytes) -> ctypes.Array[ctypes.c_char]:
        if len(key) != self.key_size:
            raise ValueError(f"{self.path}: key of {len(key)} bytes, want {self.key_size}")
        return ctypes.create_string_buffer(key, len(key))

    def update(self, key: bytes, value: bytes, flags: int = BPF_ANY) -> None:
        if len(value) != self.value_size:
            raise ValueError(f"{self.path}: value of {len(value)} bytes, want {self.value_size}")
        val = ctypes.create_string_buffer(value, len(value))
        rc = lib().bpf_map_update_elem(self.fd, self._key(key), val, flags)
        if rc:
            raise BPFError(f"update of {self.path} failed: {_errno_text(rc)}")

    def lookup(self, key: bytes) -> bytes | None:
        val = ctypes.create_string_buffer(self.value_size)
        if lib().bpf_map_lookup_elem(self.fd, self._key(key), val):
            return None
        return val.raw

    def delete(self, key: bytes) -> bool:
        """True if the key was there."""
        return lib().bpf_map_delete_elem(self.fd, self._key(key)) == 0

    def keys(self) -> Iterator[bytes]:
        lb = lib()
        cur: ctypes.Array[ctypes.c_char] | None = None
        nxt = ctypes.create_string_buffer(self.key_size)
        while lb.bpf_map_get_next_key(self.fd, cur, nxt) == 0:
            yield nxt.raw
            cur = ctypes.create_string_buffer(nxt.raw, self.key_size)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        for key in list(self.keys()):
            value = self.lookup(key)
            if value is not None:
                yield key, value


def _info(fd: int, size: int) -> bytes:
    buf = ctypes.create_string_buffer(size)
    n = ctypes.c_uint32(size)
    rc = lib().bpf_obj_get_info_by_fd(fd, buf, ctypes.byref(n))
    if rc:
        raise BPFError(f"BPF_OBJ_GET_INFO_BY_FD failed: {_errno_text(rc)}")
    return buf.raw


# struct bpf_prog_info: nr_map_ids u32 @52, map_ids u64 (user pointer) @56.
_PROG_INFO_SIZE, _PROG_NR_MAP_IDS, _PROG_MAP_IDS = 240, 52, 56
# struct bpf_map_info: name char[16] @24.
_MAP_INFO_SIZE, _MAP_NAME = 96, 24


def map_info_fd(fd: int) -> bytes:
    """struct bpf_map_info of an open map: type, id, key_size, value_size, max_entries (u32s
    from offset 0), then map_flags and name (offset 24)."""
    return _info(fd, _MAP_INFO_SIZE)


def program_map_ids(prog_id: int) -> list[int]:
    """IDs of the maps a loaded program uses (as ``bpftool prog show`` lists them)."""
    fd = lib().bpf_prog_get_fd_by_id(prog_id)
    if fd < 0:
        raise BPFError(f"no BPF program with id {prog_id}: {_errno_text(fd)}")
    try:
        nr = int.from_bytes(_info(fd, _PROG_INFO_SIZE)[_PROG_NR_MAP_IDS:_PROG_NR_MAP_IDS + 4],
                            "little")  # fmt: skip
        ids = (ctypes.c_uint32 * max(nr, 1))()
        req = ctypes.create_string_buffer(_PROG_INFO_SIZE)
        req[_PROG_NR_MAP_IDS : _PROG_NR_MAP_IDS + 4] = nr.to_bytes(4, "little")
        req[_PROG_MAP_IDS : _PROG_MAP_IDS + 8] = ctypes.addressof(ids).to_bytes(8, "little")
        n = ctypes.c_uint32(_PROG_INFO_SIZE)
        rc = lib().bpf_obj_get_info_by_fd(fd, req, ctypes.byref(n))
        if rc:
            raise BPFError(f"BPF_OBJ_GET_INFO_BY_FD failed: {_errno_text(rc)}")
        return list(ids[:nr])
    finally:
        os.close(fd)


def open_map_by_id(map_id: int) -> tuple[str, int]:
    """(name, fd) of the map with this id; the caller owns the fd."""
    fd = lib().bpf_map_get_fd_by_id(map_id)
    if fd < 0:
        raise BPFError(f"no BPF map with id {map_id}: {_errno_text(fd)}")
    raw = _info(fd, _MAP_INFO_SIZE)[_MAP_NAME : _MAP_NAME + 16]
    return raw.split(b"\0", 1)[0].decode(), fd


def possible_cpus() -> int:
    """How many per-CPU slots a per-CPU map value has from userspace (libbpf's count)."""
    n = lib().libbpf_num_possible_cpus()
    if n <= 0:
        raise BPFError(f"cannot count possible CPUs: {_errno_text(n)}")
    return n


def time_run(prog_fd: int, packet: bytes, repeat: int) -> tuple[int, int]:
    """(return value, mean ns per run) of ``repeat`` in-kernel runs on ``packet``: the
    per-packet CPU cost without any scheduler or NIC noise (benchmarks)."""
    data = ctypes.create_string_buffer(packet, len(packet))
    out = ctypes.create_string_buffer(len(packet) + 256)
    opts = _TestRunOpts(
        sz=ctypes.sizeof(_TestRunOpts),
        data_in=ctypes.cast(data, ctypes.c_void_p),
        data_size_in=len(packet),
        data_out=ctypes.cast(out, ctypes.c_void_p),
        data_size_out=len(out),
        repeat=repeat,
    )
    rc = lib().bpf_prog_test_run_opts(prog_fd, ctypes.byref(opts))
    if rc:
        raise BPFError(f"BPF_PROG_TEST_RUN failed: {_errno_text(rc)}")
    return ctypes.c_int32(opts.retval).value, int(opts.duration)


def run_once(prog_fd: int, packet: bytes) -> int:
    """Run a SCHED_CLS program once on ``packet`` (BPF_PROG_TEST_RUN); its return value, signed.

    The kernel runs it on a loopback skb: nothing is sent, so tests can drive the real programs
    (parse, conntrack, tail calls, policy) without any interface.
    """
    data = ctypes.create_string_buffer(packet, len(packet))
    out = ctypes.create_string_buffer(len(packet) + 256)
    opts = _TestRunOpts(
        sz=ctypes.sizeof(_TestRunOpts),
        data_in=ctypes.cast(data, ctypes.c_void_p),
        data_size_in=len(packet),
        data_out=ctypes.cast(out, ctypes.c_void_p),
        data_size_out=len(out),
        repeat=1,
    )
    rc = lib().bpf_prog_test_run_opts(prog_fd, ctypes.byref(opts))
    if rc:
        raise BPFError(f"BPF_PROG_TEST_RUN failed: {_errno_text(rc)}")
    return ctypes.c_int32(opts.retval).value
