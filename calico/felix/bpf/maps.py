"""The pinned maps' names, sizes and byte layouts (mirrors ``bpf-gpl/cali_types.h``).

Names are ours (``cpy_*``), not upstream's ``cali_*``: the layouts are simplified, and
upstream's clean-up deletes any ``cali_*`` map it finds. All words are little-endian except
addresses (network order) and the IP-set id (big-endian, so LPM prefixes cover it first).
"""

from __future__ import annotations

import ipaddress
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from calico.felix.bpf.libbpf import (
    BPFError,
    PinnedMap,
    open_map_by_id,
    possible_cpus,
    program_map_ids,
)

CT_MAP = "cpy_v4_ct"
CT6_MAP = "cpy_v6_ct"
IPSETS_MAP = "cpy_v4_ipsets"
IPSETS6_MAP = "cpy_v6_ipsets"
IFACE_MAP = "cpy_iface"
JUMP_ING_MAP = "cpy_jump_ing"
JUMP_EGR_MAP = "cpy_jump_egr"
STATE_MAP = "cpy_state"
HOSTIPS_MAP = "cpy_v4_hostips"
HOSTIPS6_MAP = "cpy_v6_hostips"
COUNTERS_MAP = "cpy_counters"
RULE_CTRS_MAP = "cpy_rule_ctrs"
FSAFES_MAP = "cpy_v4_fsafes"
FSAFES6_MAP = "cpy_v6_fsafes"
ROUTES_MAP = "cpy_v4_routes"
ROUTES6_MAP = "cpy_v6_routes"

CT_KEY = struct.Struct("<I4s4sHH")  # proto, addr_a, addr_b, port_a, port_b
CT6_KEY = struct.Struct("<I16s16sHH")  # the same with IPv6 addresses
CT_VALUE = struct.Struct("<QQIIII")  # created, last_seen, legs, ifindex_a, ifindex_b, pad
IFACE_VALUE = struct.Struct("<Iii")  # flags, ingress slot, egress slot
IPSET_KEY = struct.Struct("<I8s4sHBB")  # prefixlen, id (BE), addr, port, proto, pad
IPSET6_KEY = struct.Struct("<I8s16sHBB")
IPSET_VALUE = struct.Struct("<I")
PROG_FD = struct.Struct("<I")
CTR_KEY = struct.Struct("<II")  # ifindex, hook (0 = TC ingress / from-WEP, 1 = TC egress)
RULE_ID = struct.Struct("<Q")
FSAFE_KEY = struct.Struct("<IHBB4s")  # prefixlen (32 + CIDR bits), port, proto, flags, addr
FSAFE6_KEY = struct.Struct("<IHBB16s")
FSAFE_OUT = 0x1
ROUTE_KEY = struct.Struct("<I4s")  # prefixlen (address bits), addr
ROUTE6_KEY = struct.Struct("<I16s")
ROUTE_VALUE = struct.Struct("<II")  # flags, ifindex
RT_WORKLOAD, RT_LOCAL = 0x4, 0x8
# Same order as CALI_CTR_* in bpf-gpl/cali_types.h.
COUNTER_NAMES = (
    "total",
    "accepted_by_conntrack",
    "accepted_by_policy",
    "dropped_by_policy",
    "dropped_no_policy",
    "dropped_unsupported",
    "accepted_host_traffic",
    "accepted_failsafe",
    "accepted_no_host_endpoint",
    "dropped_rpf",
)
CTR_VALUE = struct.Struct(f"<{len(COUNTER_NAMES)}Q")
HOOK_NUMBERS = {"ingress": 0, "egress": 1}

CT_LEG_A, CT_LEG_B, CT_FIN_SEEN, CT_RST_SEEN = 0x1, 0x2, 0x4, 0x8
IFACE_WEP, IFACE_READY, IFACE_HEP = 0x1, 0x2, 0x8
IPSET_ID_BITS = 64
PROTO_NUMBERS = {"tcp": 6, "udp": 17, "sctp": 132}


@dataclass(frozen=True)
class CTEntry:
    proto: int
    addr_a: str
    addr_b: str
    port_a: int
    port_b: int
    created_ns: int
    last_seen_ns: int
    legs: int
    ifindex_a: int = 0  # where side A's packets last arrived at TC ingress (0: not yet)
    ifindex_b: int = 0


def _native_words(packed: bytes) -> tuple[int, ...]:
    """The u32 words a BPF program compares (network-order bytes loaded little-endian)."""
    return tuple(int.from_bytes(packed[i : i + 4], "little") for i in range(0, len(packed), 4))


def ct_key(proto: int, src: str, dst: str, sport: int, dport: int) -> bytes:
    """Canonical key: (src, sport) is side A iff it compares lower (native-int address words,
    word 0 first); an IPv6 pair gives a ``cpy_v6_ct`` key."""
    sa, da = ipaddress.ip_address(src), ipaddress.ip_address(dst)
    if sa.version != da.version:
        raise ValueError(f"{src} and {dst} are of different IP versions")
    s, d = sa.packed, da.packed
    layout = CT_KEY if sa.version == 4 else CT6_KEY
    si, di = _native_words(s), _native_words(d)
    if si < di or (si == di and sport < dport):
        return layout.pack(proto, s, d, sport, dport)
    return layout.pack(proto, d, s, dport, sport)


def decode_ct(key: bytes, value: bytes) -> CTEntry:
    """Either map's entry (the key's size tells the family)."""
    layout = CT6_KEY if len(key) == CT6_KEY.size else CT_KEY
    proto, a, b, pa, pb = layout.unpack(key)
    created, last_seen, legs, if_a, if_b, _ = CT_VALUE.unpack(value)
    return CTEntry(
        proto,
        str(ipaddress.ip_address(a)),
        str(ipaddress.ip_address(b)),
        pa,
        pb,
        created,
        last_seen,
        legs,
        if_a,
        if_b,
    )


def ipset_key(set_id: int, member: str) -> bytes | None:
    """LPM key of one IPv4 member (``10.0.0.0/8``, ``10.0.0.1``, ``10.0.0.1,tcp:80``).

    None for IPv6 members (:func:`ipset6_key`) and named ports of other protocols (upstream
    skips those too).
    """
    return _ipset_key(set_id, member, 4)


def ipset6_key(set_id: int, member: str) -> bytes | None:
    """``cpy_v6_ipsets`` key of one IPv6 member (``fd00::/64``, ``fd00::1,tcp:80``); None
    for IPv4 members and named ports of other protocols."""
    return _ipset_key(set_id, member, 6)


def _ipset_key(set_id: int, member: str, version: int) -> bytes | None:
    addr_text, _, proto_port = member.partition(",")
    net = ipaddress.ip_network(addr_text.strip(), strict=False)
    if net.version != version:
        return None
    layout = IPSET_KEY if version == 4 else IPSET6_KEY
    sid = set_id.to_bytes(8, "big")
    if not proto_port:
        return layout.pack(IPSET_ID_BITS + net.prefixlen, sid, net.network_address.packed, 0, 0, 0)
    proto_name, _, port = proto_port.partition(":")
    proto = PROTO_NUMBERS.get(proto_name.strip().lower())
    if proto is None:
        return None
    full = IPSET_ID_BITS + net.max_prefixlen + 16 + 8
    return layout.pack(full, sid, net.network_address.packed, int(port), proto, 0)


def fsafe_key(protocol: str, port: int, net: str, outbound: bool) -> bytes:
    """The failsafe LPM key of one FailsafeInbound/OutboundHostPorts entry (``net``: the
    remote side's CIDR, either family); the map is :meth:`Maps.fsafe_map` of its length."""
    cidr = ipaddress.ip_network(net, strict=False)
    fmt = FSAFE6_KEY if cidr.version == 6 else FSAFE_KEY
    flags = FSAFE_OUT if outbound else 0
    return fmt.pack(32 + cidr.prefixlen, port, PROTO_NUMBERS[protocol], flags,
                    cidr.network_address.packed)  # fmt: skip


def route_key(net: str) -> bytes:
    """``cpy_v4_routes`` / ``cpy_v6_routes`` key of a CIDR or address (the length tells which
    map: :meth:`Maps.route_map`); ValueError if unparseable."""
    cidr = ipaddress.ip_network(net.strip(), strict=False)
    fmt = ROUTE6_KEY if cidr.version == 6 else ROUTE_KEY
    return fmt.pack(cidr.prefixlen, cidr.network_address.packed)


def decode_route(key: bytes) -> str:
    """The CIDR a routes-map key stands for."""
    fmt = ROUTE6_KEY if len(key) == ROUTE6_KEY.size else ROUTE_KEY
    bits, addr = fmt.unpack(key)
    return f"{ipaddress.ip_address(addr)}/{bits}"


def workload_route(ifindex: int) -> bytes:
    """The value of a local workload's address: LOCAL|WORKLOAD on its interface."""
    return ROUTE_VALUE.pack(RT_LOCAL | RT_WORKLOAD, ifindex)


@dataclass(frozen=True)
class MapSizes:
    conntrack: int = 512000
    ipsets: int = 1048576
    iface: int = 1000
    jump: int = 16384
    routes: int = 262144

    def defines(self) -> dict[str, int]:
        return {
            "CALI_ROUTES_MAP_SIZE": self.routes,
            "CALI_CT_MAP_SIZE": self.conntrack,
            "CALI_IPSETS_MAP_SIZE": self.ipsets,
            "CALI_IFACE_MAP_SIZE": self.iface,
            "CALI_JUMP_MAP_SIZE": self.jump,
        }


class _Unused(PinnedMap):
    """A map no attached program uses (found-by-id mode): empty, read-only."""

    def __init__(self, name: str, key_size: int, value_size: int) -> None:
        self.path, self.key_size, self.value_size, self.fd = name, key_size, value_size, -1

    def keys(self) -> Iterator[bytes]:
        return iter(())

    def lookup(self, key: bytes) -> bytes | None:
        return None

    def update(self, key: bytes, value: bytes, flags: int = 0) -> None:
        raise BPFError(f"{self.path} is not used by any attached program")

    def delete(self, key: bytes) -> bool:
        return False


class Maps:
    """Open handles on the pinned maps under ``pin_dir`` (they exist once an object loaded),
    or, with ``fds`` (name -> fd, see :func:`discover`), on maps found through programs."""

    def __init__(self, pin_dir: str, fds: dict[str, int] | None = None) -> None:
        self.pin_dir = pin_dir
        self._fds = fds
        self.ct = self._open(CT_MAP, CT_KEY.size, CT_VALUE.size)
        self.ct6 = self._open(CT6_MAP, CT6_KEY.size, CT_VALUE.size)
        self.ipsets = self._open(IPSETS_MAP, IPSET_KEY.size, IPSET_VALUE.size)
        self.ipsets6 = self._open(IPSETS6_MAP, IPSET6_KEY.size, IPSET_VALUE.size)
        self.iface = self._open(IFACE_MAP, 4, IFACE_VALUE.size)
        self.hostips = self._open(HOSTIPS_MAP, 4, 4)
        self.hostips6 = self._open(HOSTIPS6_MAP, 16, 4)
        self.jump = {
            "ingress": self._open(JUMP_ING_MAP, 4, 4),
            "egress": self._open(JUMP_EGR_MAP, 4, 4),
        }
        ncpu = possible_cpus()
        self.ncpu = ncpu
        # Per-CPU maps: userspace reads and writes one value per possible CPU, 8-byte aligned.
        self.counters = self._open(COUNTERS_MAP, CTR_KEY.size, CTR_VALUE.size * ncpu)
        self.rule_ctrs = self._open(RULE_CTRS_MAP, RULE_ID.size, 8 * ncpu)
        self.fsafes = self._open(FSAFES_MAP, FSAFE_KEY.size, 4)
        self.fsafes6 = self._open(FSAFES6_MAP, FSAFE6_KEY.size, 4)
        self.routes = self._open(ROUTES_MAP, ROUTE_KEY.size, ROUTE_VALUE.size)
        self.routes6 = self._open(ROUTES6_MAP, ROUTE6_KEY.size, ROUTE_VALUE.size)

    def _open(self, name: str, key_size: int, value_size: int) -> PinnedMap:
        if self._fds is None:
            return PinnedMap(self._p(name), key_size, value_size)
        fd = self._fds.pop(name, None)
        if fd is None:
            return _Unused(name, key_size, value_size)
        return PinnedMap(name, key_size, value_size, fd=fd)

    def _p(self, name: str) -> str:
        return os.path.join(self.pin_dir, name)

    def close(self) -> None:
        for m in (
            self.ct,
            self.ct6,
            self.ipsets,
            self.ipsets6,
            self.iface,
            self.hostips,
            self.hostips6,
            self.counters,
            self.rule_ctrs,
            self.fsafes,
            self.fsafes6,
            self.routes,
            self.routes6,
            *self.jump.values(),
        ):
            m.close()

    def reset_counters(self, ifindex: int, hook: str) -> None:
        """Create (or zero) the interface's counters for ``hook``: programs only count into
        entries Felix made, so the map never fills with unknown interfaces."""
        key = CTR_KEY.pack(ifindex, HOOK_NUMBERS[hook])
        self.counters.update(key, bytes(CTR_VALUE.size * self.ncpu))

    def delete_counters(self, ifindex: int) -> None:
        for hook in HOOK_NUMBERS.values():
            self.counters.delete(CTR_KEY.pack(ifindex, hook))

    def read_counters(self, ifindex: int) -> dict[str, dict[str, int]] | None:
        """hook -> counter name -> sum over CPUs; None if the interface has no entries."""
        out: dict[str, dict[str, int]] = {}
        for hook, num in HOOK_NUMBERS.items():
            raw = self.counters.lookup(CTR_KEY.pack(ifindex, num))
            if raw is None:
                continue
            sums = [0] * len(COUNTER_NAMES)
            for cpu in range(self.ncpu):
                vals = CTR_VALUE.unpack_from(raw, cpu * CTR_VALUE.size)
                sums = [a + b for a, b in zip(sums, vals, strict=True)]
            out[hook] = dict(zip(COUNTER_NAMES, sums, strict=True))
        return out or None

    def counter_ifindexes(self) -> list[int]:
        return sorted({CTR_KEY.unpack(k)[0] for k in self.counters.keys()})  # noqa: SIM118

    def rule_hits(self) -> dict[int, int]:
        """Rule ID -> hits summed over CPUs."""
        out = {}
        for key, raw in self.rule_ctrs.items():
            (rid,) = RULE_ID.unpack(key)
            out[rid] = sum(struct.unpack(f"<{self.ncpu}Q", raw))
        return out

    @classmethod
    def discover(cls, netns: str | None = None) -> Maps:
        """The maps of the dataplane whose main programs are attached in ``netns``, found by
        program id (no bpffs needed): the main programs' maps, then those of the policy
        programs in the jump maps (IP sets, rule counters). BPFError if nothing is attached."""
        from calico.felix.bpf import attach

        progs = attach.attached_program_ids(netns)
        if not progs:
            raise BPFError("no calico BPF programs attached to any interface here")
        fds: dict[str, int] = {}
        seen: set[int] = set()

        def add(prog_id: int) -> None:
            for map_id in program_map_ids(prog_id):
                if map_id in seen:
                    continue
                seen.add(map_id)
                name, fd = open_map_by_id(map_id)
                if name in fds or not name.startswith("cpy_"):
                    os.close(fd)
                else:
                    fds[name] = fd

        for prog_id in progs.values():
            add(prog_id)
        for jump in (JUMP_ING_MAP, JUMP_EGR_MAP):
            if jump not in fds:
                continue
            jmap = PinnedMap(jump, 4, 4, fd=os.dup(fds[jump]))
            try:
                policy_ids = {PROG_FD.unpack(v)[0] for _, v in jmap.items()}
            finally:
                jmap.close()
            for pid in sorted(policy_ids):  # userspace reads a prog array slot as a prog id
                add(pid)
        try:
            return cls("", fds)
        finally:
            for fd in fds.values():  # any we did not use
                os.close(fd)

    def conntrack(self) -> list[CTEntry]:
        """Both families' entries, IPv4 first."""
        return [decode_ct(k, v) for m in (self.ct, self.ct6) for k, v in m.items()]

    def ipset_map(self, key: bytes) -> PinnedMap:
        """The LPM map a key from :func:`ipset_key` / :func:`ipset6_key` belongs in."""
        return self.ipsets6 if len(key) == IPSET6_KEY.size else self.ipsets

    def fsafe_map(self, key: bytes) -> PinnedMap:
        return self.fsafes6 if len(key) == FSAFE6_KEY.size else self.fsafes

    def route_map(self, key: bytes) -> PinnedMap:
        """The routes map a :func:`route_key` key belongs in."""
        return self.routes6 if len(key) == ROUTE6_KEY.size else self.routes

    def hostip_map(self, packed: bytes) -> PinnedMap:
        """The host-address map for a packed IPv4 (4 bytes) or IPv6 (16 bytes) address."""
        return self.hostips6 if len(packed) == 16 else self.hostips
