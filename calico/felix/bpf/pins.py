"""Pinned maps whose parameters changed between Felix runs: reused, resized or recreated.

libbpf refuses to load an object whose pinned map differs from its definition, so a change of
map size (``BPFMapSize*``) or of a value layout would otherwise leave BPF mode unable to start.
As upstream does (design/felix-bpf.md "Pinned map upgrades"): a pin matching the object's map
(type, key and value sizes, flags, max_entries) is reused; one whose type, sizes or flags
differ is deleted (the object recreates the map empty); one that differs only in max_entries is
moved to ``<name>_old``, the object creates the new map, and the entries are copied across
before the old pin is removed. A ``<name>_old`` left by an interrupted upgrade is restored first.
"""

from __future__ import annotations

import ctypes
import logging
import os
import struct
from dataclasses import dataclass

from calico.felix.bpf.libbpf import BPFError, PinnedMap, lib, map_info_fd, possible_cpus

log = logging.getLogger(__name__)

OLD_SUFFIX = "_old"
# Map types whose userspace value is one slot per possible CPU (each rounded up to 8 bytes).
_PERCPU_TYPES = frozenset({5, 6, 10})  # PERCPU_HASH, PERCPU_ARRAY, LRU_PERCPU_HASH
# Types whose entries are kernel object references (program fds): never copied, the new map
# is filled by whoever programs it.
_NO_COPY_TYPES = frozenset({3})  # PROG_ARRAY


@dataclass(frozen=True)
class MapParams:
    name: str
    type: int
    key_size: int
    value_size: int
    max_entries: int
    flags: int


@dataclass(frozen=True)
class Resize:
    """A map to refill from its ``_old`` pin once the object has loaded."""

    params: MapParams


def declared_maps(obj_path: str) -> list[MapParams]:
    """The maps an object file defines that libbpf pins by name (opened, not loaded)."""
    lb = lib()
    obj = lb.bpf_object__open_file(obj_path.encode(), None)
    if not obj or lb.libbpf_get_error(obj):
        raise BPFError(f"cannot open BPF object {obj_path}")
    try:
        out: list[MapParams] = []
        m = lb.bpf_object__next_map(obj, None)
        while m:
            if not lb.bpf_map__is_internal(m):  # .rodata/.bss are never pinned
                out.append(
                    MapParams(
                        name=lb.bpf_map__name(m).decode(),
                        type=int(lb.bpf_map__type(m)),
                        key_size=int(lb.bpf_map__key_size(m)),
                        value_size=int(lb.bpf_map__value_size(m)),
                        max_entries=int(lb.bpf_map__max_entries(m)),
                        flags=int(lb.bpf_map__map_flags(m)),
                    )
                )
            m = lb.bpf_object__next_map(obj, m)
        return out
    finally:
        lb.bpf_object__close(obj)


def pinned_params(path: str) -> MapParams | None:
    """The parameters of the map pinned at ``path``; None if nothing is pinned there."""
    fd = lib().bpf_obj_get(path.encode())
    if fd < 0:
        return None
    try:
        mtype, _id, key, value, entries, flags = struct.unpack_from("<6I", map_info_fd(fd))
        return MapParams(os.path.basename(path), mtype, key, value, entries, flags)
    finally:
        os.close(fd)


def _rename_pin(src: str, dst: str) -> None:
    """Re-pin the map at ``src`` as ``dst`` (bpffs has no rename), then drop ``src``."""
    fd = lib().bpf_obj_get(src.encode())
    if fd < 0:
        raise BPFError(f"cannot open pinned map {src}")
    try:
        if lib().bpf_obj_pin(fd, dst.encode()):
            raise BPFError(f"cannot pin {src} as {dst}: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)
    os.unlink(src)


def prepare(obj_path: str, pin_dir: str) -> list[Resize]:
    """Make the pins under ``pin_dir`` loadable with ``obj_path``; call before loading it.

    Returns the maps :func:`finish` must refill after the load.
    """
    resizes: list[Resize] = []
    for want in declared_maps(obj_path):
        path = os.path.join(pin_dir, want.name)
        old = path + OLD_SUFFIX
        if os.path.exists(old):
            log.warning("Restoring %s left by an interrupted map upgrade", old)
            if os.path.exists(path):
                os.unlink(path)
            _rename_pin(old, path)
        have = pinned_params(path)
        if have is None or have == want:
            continue
        if _layout(have) != _layout(want):
            log.warning(
                "Pinned map %s has another layout (type, key, value, flags %s; want %s):"
                " recreating it empty",
                path,
                _layout(have),
                _layout(want),
            )
            os.unlink(path)
            continue
        log.info(
            "Pinned map %s resized from %d to %d entries: copying its entries",
            path,
            have.max_entries,
            want.max_entries,
        )
        _rename_pin(path, old)
        resizes.append(Resize(want))
    return resizes


def _layout(p: MapParams) -> tuple[int, int, int, int]:
    """Everything but max_entries: a difference here makes the old entries unreadable."""
    return (p.type, p.key_size, p.value_size, p.flags)


def _user_value_size(p: MapParams) -> int:
    if p.type in _PERCPU_TYPES:
        return ((p.value_size + 7) // 8 * 8) * possible_cpus()
    return p.value_size


def finish(resizes: list[Resize], pin_dir: str) -> dict[str, int]:
    """Copy each resized map's entries from its ``_old`` pin (as many as fit), then remove it.

    Returns name -> entries copied.
    """
    copied: dict[str, int] = {}
    for r in resizes:
        p = r.params
        path = os.path.join(pin_dir, p.name)
        old_path = path + OLD_SUFFIX
        n = 0
        if p.type not in _NO_COPY_TYPES:
            vsize = _user_value_size(p)
            old = PinnedMap(old_path, p.key_size, vsize)
            new = PinnedMap(path, p.key_size, vsize)
            try:
                for key, value in old.items():
                    try:
                        new.update(key, value)
                    except BPFError as exc:  # full (a shrunk hash map): keep what fitted
                        log.warning("%s: stopped copying after %d entries: %s", path, n, exc)
                        break
                    n += 1
            finally:
                old.close()
                new.close()
        os.unlink(old_path)
        copied[p.name] = n
    return copied
