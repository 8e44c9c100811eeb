"""Pinned maps across a change of map size or layout (calico.felix.bpf.pins), on a real bpffs:
a resized map keeps its entries, a map of another layout is recreated, a leftover ``_old`` pin
is restored; without this the second load fails in libbpf."""

from __future__ import annotations

import ctypes
import os
import struct
from pathlib import Path

import pytest
from bpf_support import need_bpf, private_bpffs

from calico.felix.bpf import pins
from calico.felix.bpf.dataplane import BPFDataplane
from calico.felix.bpf.libbpf import lib
from calico.felix.bpf.maps import CT6_MAP, CT_KEY, CT_MAP, CT_VALUE, HOSTIPS_MAP, MapSizes

pytestmark = pytest.mark.usefixtures("_bpf")


@pytest.fixture
def _bpf() -> None:
    need_bpf()


def _ct_key(i: int) -> bytes:
    return CT_KEY.pack(6, bytes([10, 0, 0, 1]), bytes([10, 0, 1, i]), 1000 + i, 80)


def _start(globals_dir: str, cache: str, ct_size: int) -> BPFDataplane:
    return BPFDataplane(globals_dir, cache, sizes=MapSizes(conntrack=ct_size))


def _leftovers(globals_dir: str) -> list[str]:
    return sorted(n for n in os.listdir(globals_dir) if n.endswith(pins.OLD_SUFFIX))


def test_resized_conntrack_keeps_its_entries_and_same_size_reuses(tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    with private_bpffs(str(tmp_path)) as mnt:
        g = os.path.join(mnt, "globals")
        dp = _start(g, cache, 1024)
        assert dp.resized == {}
        value = CT_VALUE.pack(1, 2, 3, 4, 5, 0)
        for i in range(5):
            dp.maps.ct.update(_ct_key(i), value)
        dp.close()

        dp = _start(g, cache, 1024)  # unchanged: the pin is reused as it is
        assert dp.resized == {} and len(list(dp.maps.ct.keys())) == 5
        dp.close()

        dp = _start(g, cache, 2048)
        try:
            assert dp.resized == {CT_MAP: 5, CT6_MAP: 0}
            params = pins.pinned_params(os.path.join(g, CT_MAP))
            assert params is not None and params.max_entries == 2048
            assert sorted(dp.maps.ct.keys()) == sorted(_ct_key(i) for i in range(5))
            assert dp.maps.ct.lookup(_ct_key(3)) == value
            assert _leftovers(g) == []
        finally:
            dp.close()


def test_map_of_another_layout_is_recreated_empty(tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    with private_bpffs(str(tmp_path)) as mnt:
        g = os.path.join(mnt, "globals")
        _start(g, cache, 1024).close()
        path = os.path.join(g, HOSTIPS_MAP)
        want = pins.pinned_params(path)
        assert want is not None
        # An older layout: the same name pinned with a value twice as wide.
        os.unlink(path)
        lb = lib()
        create = lb.bpf_map_create
        create.argtypes = (
            [ctypes.c_int, ctypes.c_char_p] + [ctypes.c_uint32] * 3 + [ctypes.c_void_p]
        )
        create.restype = ctypes.c_int
        fd = create(1, HOSTIPS_MAP.encode(), want.key_size, want.value_size * 2, 16, None)
        assert fd >= 0
        try:
            assert lb.bpf_obj_pin(fd, path.encode()) == 0
            stale = pins.PinnedMap(path, want.key_size, want.value_size * 2, fd=os.dup(fd))
            stale.update(bytes(want.key_size), bytes(want.value_size * 2))
            stale.close()
        finally:
            os.close(fd)

        dp = _start(g, cache, 1024)  # libbpf alone would refuse this pin
        try:
            got = pins.pinned_params(path)
            assert got == want
            assert list(dp.maps.hostips.keys()) == []  # the stale entry went with the map
            assert HOSTIPS_MAP not in dp.resized
        finally:
            dp.close()


def test_conntrack_of_the_pre_ifindex_layout_is_recreated_empty(tmp_path: Path) -> None:
    """The conntrack value grew from 24 bytes (created, last_seen, legs, pad) to 32 (+ each
    side's recorded ifindex): a Felix upgrade over the old pin starts with an empty table
    (established flows are re-policed on their next packet) instead of failing to load."""
    cache = str(tmp_path / "cache")
    with private_bpffs(str(tmp_path)) as mnt:
        g = os.path.join(mnt, "globals")
        _start(g, cache, 1024).close()
        path = os.path.join(g, CT_MAP)
        want = pins.pinned_params(path)
        assert want is not None and want.value_size == CT_VALUE.size == 32
        os.unlink(path)
        lb = lib()
        create = lb.bpf_map_create
        create.argtypes = (
            [ctypes.c_int, ctypes.c_char_p] + [ctypes.c_uint32] * 3 + [ctypes.c_void_p]
        )
        create.restype = ctypes.c_int
        fd = create(want.type, CT_MAP.encode(), CT_KEY.size, 24, 1024, None)  # the old layout
        assert fd >= 0
        try:
            assert lb.bpf_obj_pin(fd, path.encode()) == 0
            old = pins.PinnedMap(path, CT_KEY.size, 24, fd=os.dup(fd))
            old.update(_ct_key(1), struct.pack("<QQII", 1, 2, 3, 0))
            old.close()
        finally:
            os.close(fd)

        dp = _start(g, cache, 1024)
        try:
            assert pins.pinned_params(path) == want
            assert list(dp.maps.ct.keys()) == []
            assert CT_MAP not in dp.resized and _leftovers(g) == []
            dp.maps.ct.update(_ct_key(1), CT_VALUE.pack(1, 2, 3, 4, 5, 0))  # the new layout
            assert dp.maps.ct.lookup(_ct_key(1)) == CT_VALUE.pack(1, 2, 3, 4, 5, 0)
        finally:
            dp.close()


def test_leftover_old_pin_from_an_interrupted_upgrade_is_restored(tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    with private_bpffs(str(tmp_path)) as mnt:
        g = os.path.join(mnt, "globals")
        dp = _start(g, cache, 1024)
        dp.maps.ct.update(_ct_key(7), CT_VALUE.pack(9, 9, 9, 9, 9, 0))
        dp.close()
        path = os.path.join(g, CT_MAP)
        pins._rename_pin(path, path + pins.OLD_SUFFIX)  # as if Felix died mid-upgrade
        assert not os.path.exists(path)

        dp = _start(g, cache, 1024)
        try:
            assert dp.maps.ct.lookup(_ct_key(7)) == CT_VALUE.pack(9, 9, 9, 9, 9, 0)
            assert _leftovers(g) == [] and dp.resized == {}
        finally:
            dp.close()


def test_declared_maps_match_the_pins_the_object_makes(tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    with private_bpffs(str(tmp_path)) as mnt:
        g = os.path.join(mnt, "globals")
        dp = _start(g, cache, 1024)
        try:
            declared = pins.declared_maps(dp.compiler.compile_file("tc.c"))
            assert {p.name for p in declared} >= {CT_MAP, CT6_MAP, HOSTIPS_MAP}
            for p in declared:
                assert pins.pinned_params(os.path.join(g, p.name)) == p, p.name
        finally:
            dp.close()
