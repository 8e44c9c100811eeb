"""Helpers for the BPF dataplane kernel tests: a private bpffs, packets, policy programming."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import struct
from collections.abc import Iterator, Mapping, Sequence

import pytest

from calico.felix.bpf import bpffs
from calico.felix.bpf.dataplane import BPFDataplane
from calico.felix.bpf.idalloc import IDAllocator
from calico.felix.bpf.polprog import EndpointPolicy, Generator
from calico.felix.messages import Policy, PolicyID, Profile, TierInfo


def need_bpf() -> None:
    if os.geteuid() != 0 or not shutil.which("clang") or not shutil.which("ip"):
        pytest.skip("needs root, clang and iproute2")


@contextlib.contextmanager
def private_bpffs(base: str) -> Iterator[str]:
    """A bpffs instance of our own on ``base/bpffs`` (invisible to others), unmounted after."""
    mnt = os.path.join(base, "bpffs")
    bpffs.mount_bpffs(mnt)
    try:
        yield mnt
    finally:
        bpffs.unmount(mnt)


@contextlib.contextmanager
def dataplane(
    base: str, netns: str | None = None, defines: dict[str, int] | None = None
) -> Iterator[BPFDataplane]:
    with private_bpffs(base) as mnt:
        dp = BPFDataplane(
            os.path.join(mnt, "globals"), os.path.join(base, "cache"), netns=netns, defines=defines
        )
        try:
            yield dp
        finally:
            for iface in dp.ifaces:
                with contextlib.suppress(Exception):
                    dp.remove_iface(iface)
            dp.close()


class PolicyState:
    """The calc-graph view of policy the tests program: policies, profiles, IP set ids."""

    def __init__(self) -> None:
        self.policies: dict[PolicyID, Policy] = {}
        self.profiles: dict[str, Profile] = {}
        self.ids = IDAllocator()

    def sources(
        self,
        tiers: Sequence[TierInfo] = (),
        profile_ids: Sequence[str] = (),
        admin_down: bool = False,
    ) -> dict[str, str]:
        """Hook -> C source: TC ingress runs the egress policy, TC egress the ingress policy."""
        gen = Generator(self.policies, self.profiles, self.ids.get_or_alloc)
        return {
            hook: gen.source(EndpointPolicy(tuple(tiers), tuple(profile_ids), inbound, admin_down))
            for hook, inbound in (("ingress", False), ("egress", True))
        }


def set_members(
    dp: BPFDataplane, state: PolicyState, set_id: str, members: Mapping[str, bool]
) -> None:
    """Add (True) or remove (False) members of ``set_id`` directly in the family's LPM map."""
    from calico.felix.bpf.maps import IPSET_VALUE, ipset6_key, ipset_key

    sid = state.ids.get_or_alloc(set_id)
    for member, present in members.items():
        key = ipset_key(sid, member) or ipset6_key(sid, member)
        assert key is not None
        if present:
            dp.maps.ipset_map(key).update(key, IPSET_VALUE.pack(1))
        else:
            dp.maps.ipset_map(key).delete(key)


# --- packets ------------------------------------------------------------------------------------


def _csum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def packet(
    src: str,
    dst: str,
    proto: int,
    sport: int = 0,
    dport: int = 0,
    *,
    tcp_flags: int = 0x02,
    icmp_type: int = 8,
    icmp_code: int = 0,
) -> bytes:
    """Ethernet + IPv4 + TCP/UDP/ICMP header (enough for the programs to parse)."""
    if proto == 6:
        l4 = struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, tcp_flags, 1024, 0, 0)
    elif proto == 17:
        l4 = struct.pack("!HHHH", sport, dport, 8, 0)
    elif proto == 1:
        l4 = struct.pack("!BBHHH", icmp_type, icmp_code, 0, 1, 1)
    else:
        l4 = b"\0" * 8
    total = 20 + len(l4)
    ip = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        total,
        1,
        0,
        64,
        proto,
        0,
        ipaddress.IPv4Address(src).packed,
        ipaddress.IPv4Address(dst).packed,
    )
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    eth = b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + b"\x08\x00"
    return eth + ip + l4


def packet6(
    src: str,
    dst: str,
    proto: int,
    sport: int = 0,
    dport: int = 0,
    *,
    tcp_flags: int = 0x02,
    icmp_type: int = 128,
    icmp_code: int = 0,
    ext: Sequence[tuple[int, bytes]] = (),
) -> bytes:
    """Ethernet + IPv6 (+ extension headers ``ext``: (header number, its 8-byte multiple
    body incl. the next-header byte, filled in here)) + TCP/UDP/ICMPv6 header."""
    if proto == 6:
        l4 = struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, tcp_flags, 1024, 0, 0)
    elif proto == 17:
        l4 = struct.pack("!HHHH", sport, dport, 8, 0)
    elif proto == 58:
        l4 = struct.pack("!BBHHH", icmp_type, icmp_code, 0, 1, 1)
    else:
        l4 = b"\0" * 8
    chain = [num for num, _ in ext] + [proto]
    hdrs = b"".join(bytes([chain[i + 1]]) + body[1:] for i, (_, body) in enumerate(ext))
    payload = hdrs + l4
    ip = struct.pack(
        "!IHBB16s16s",
        6 << 28,
        len(payload),
        chain[0],
        64,
        ipaddress.IPv6Address(src).packed,
        ipaddress.IPv6Address(dst).packed,
    )
    eth = b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + b"\x86\xdd"
    return eth + ip + payload
