"""IPv6 in the BPF programs (real programs, BPF_PROG_TEST_RUN on crafted packets): the v6
walk of the generated policy, the v6 conntrack map, v6 LPM IP sets, extension headers, ND/MLD
skipping policy, the host bypass and the scanner.

Expected verdicts follow ``calico.felix.rules.matches.rule_match`` for version 6: rules with
``ipVersion: 4``, protocol ICMP or positive nets all IPv4 are left out of the v6 walk (and the
mirror images out of the v4 walk), exactly as the nftables renderer leaves them out of a
family's chain.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bpf_support import PolicyState, dataplane, need_bpf, packet, packet6, set_members

from calico.felix.bpf.ctscanner import Timeouts, monotonic_ns, scan
from calico.felix.bpf.dataplane import BPFDataplane
from calico.felix.bpf.libbpf import run_once
from calico.felix.bpf.maps import CT6_KEY, CT_LEG_A, CT_LEG_B
from calico.felix.messages import ICMPTypeCode, Policy, PolicyID, PortRange, Profile, Rule, TierInfo

pytestmark = pytest.mark.root

A6, B6, C6 = "fd70::1", "fd70::2", "fd71::3"
A4, B4 = "10.70.0.1", "10.70.0.2"
TCP, UDP, ICMP, ICMP6 = 6, 17, 1, 58
ALLOW, DENY = -1, 2  # TC_ACT_UNSPEC, TC_ACT_SHOT
HOPOPTS, DSTOPTS, FRAGMENT = 0, 60, 44


@pytest.fixture(scope="module")
def dp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BPFDataplane]:
    need_bpf()
    with dataplane(str(tmp_path_factory.mktemp("bpf6sem"))) as d:
        d.register("lo", 1)  # BPF_PROG_TEST_RUN hands the program a loopback skb
        d.set_workload_routes("lo", ("10.70.0.0/24", "fd70::/15"))  # pass from-WEP RPF
        yield d


def flush_ct(dp: BPFDataplane) -> None:
    for m in (dp.maps.ct, dp.maps.ct6):
        for key in list(m.keys()):
            m.delete(key)


def program(dp: BPFDataplane, *rules: Rule) -> PolicyState:
    """One ingress policy (to-WEP) with ``rules``; egress allows everything."""
    s = PolicyState()
    pid = PolicyID("p", tier="t")
    s.policies[pid] = Policy(inbound_rules=rules, outbound_rules=(Rule(action="allow"),))
    dp.set_policies("lo", s.sources(tiers=(TierInfo("t", (pid,), (pid,)),)))
    flush_ct(dp)
    return s


def to_wep(dp: BPFDataplane, pkt: bytes) -> int:
    flush_ct(dp)
    return run_once(dp.to_fd, pkt)


def tcp6(src: str = A6, dst: str = B6, dport: int = 80, sport: int = 40000, **kw: int) -> bytes:
    return packet6(src, dst, TCP, sport, dport, **kw)


def test_rules_go_to_their_family_walk(dp: BPFDataplane) -> None:
    program(dp, Rule(action="allow", protocol="tcp", ip_version=6, dst_ports=(PortRange(80, 80),)))
    assert to_wep(dp, tcp6()) == ALLOW
    assert to_wep(dp, tcp6(dport=81)) == DENY
    assert to_wep(dp, packet(A4, B4, TCP, 40000, 80)) == DENY  # ipVersion 6: not in v4
    program(dp, Rule(action="allow", src_net=("10.0.0.0/8",)))
    assert to_wep(dp, tcp6()) == DENY  # all-IPv4 nets: not in the v6 walk
    assert to_wep(dp, packet(A4, B4, TCP, 40000, 80)) == ALLOW
    # a mixed list: each family keeps its own part
    program(dp, Rule(action="allow", src_net=("fd70::/64", "10.70.0.1/32")))
    assert to_wep(dp, tcp6(A6)) == ALLOW
    assert to_wep(dp, tcp6(C6)) == DENY  # fd71::3 is outside fd70::/64
    assert to_wep(dp, packet(A4, B4, TCP, 40000, 80)) == ALLOW
    # negated IPv6 nets; an all-IPv4 negation is dropped from the v6 walk, not the rule
    program(dp, Rule(action="allow", not_src_net=("fd70::1/128",), not_dst_net=("10.0.0.0/8",)))
    assert to_wep(dp, tcp6("fd70::1")) == DENY
    assert to_wep(dp, tcp6("fd70::4")) == ALLOW
    # /127 boundary in the last word
    program(dp, Rule(action="allow", dst_net=("fd70::2/127",)))
    assert to_wep(dp, tcp6(dst="fd70::3")) == ALLOW
    assert to_wep(dp, tcp6(dst="fd70::4")) == DENY


def test_icmpv6_rules_and_icmp_rules_stay_in_their_family(dp: BPFDataplane) -> None:
    program(dp, Rule(action="allow", protocol="icmpv6", icmp=ICMPTypeCode(128, 0)))
    assert to_wep(dp, packet6(A6, B6, ICMP6, icmp_type=128)) == ALLOW
    assert to_wep(dp, packet6(A6, B6, ICMP6, icmp_type=128, icmp_code=1)) == DENY
    assert to_wep(dp, packet(A4, B4, ICMP, icmp_type=8)) == DENY
    # a v4 ICMP rule never matches ICMPv6 (not even a "type 8")
    program(dp, Rule(action="allow", protocol="icmp"))
    assert to_wep(dp, packet6(A6, B6, ICMP6, icmp_type=128)) == DENY
    assert to_wep(dp, packet(A4, B4, ICMP, icmp_type=8)) == ALLOW
    program(dp, Rule(action="allow", protocol="icmpv6", not_icmp=ICMPTypeCode(1)))
    assert to_wep(dp, packet6(A6, B6, ICMP6, icmp_type=1, icmp_code=4)) == DENY
    assert to_wep(dp, packet6(A6, B6, ICMP6, icmp_type=2)) == ALLOW


def test_neighbour_discovery_and_mld_skip_policy(dp: BPFDataplane) -> None:
    """Deny-all still lets ND (133-137) and MLD (130-132, 143) through, both hooks; echo and
    the types just outside the ranges are policed."""
    s = PolicyState()
    dp.set_policies("lo", s.sources())  # deny-all both ways
    flush_ct(dp)
    for t in (130, 131, 132, 133, 134, 135, 136, 137, 143):
        assert run_once(dp.to_fd, packet6("fe80::1", "ff02::1", ICMP6, icmp_type=t)) == ALLOW
        assert run_once(dp.from_fd, packet6("fe80::1", "ff02::1", ICMP6, icmp_type=t)) == ALLOW
    for t in (128, 129, 138, 142):
        assert run_once(dp.to_fd, packet6("fe80::1", "ff02::1", ICMP6, icmp_type=t)) == DENY
    assert dp.maps.conntrack() == []  # ND is not tracked


def test_ipv6_conntrack_legs_and_replies(dp: BPFDataplane) -> None:
    s = PolicyState()
    s.profiles["allow"] = Profile(inbound_rules=(Rule(action="allow"),))
    s.profiles["none"] = Profile()
    dp.set_policies("lo", s.sources(profile_ids=("allow",)))
    flush_ct(dp)
    assert run_once(dp.to_fd, tcp6(B6, A6, 80, 40000)) == ALLOW
    (entry,) = dp.maps.conntrack()
    assert (entry.addr_a, entry.port_a, entry.addr_b, entry.port_b) == (A6, 80, B6, 40000)
    assert entry.legs == CT_LEG_A  # the destination (A6, side A) approved
    (key,) = dp.maps.ct6.keys()
    assert len(key) == CT6_KEY.size and list(dp.maps.ct.keys()) == []
    dp.set_policies("lo", s.sources(profile_ids=("none",)))
    assert run_once(dp.from_fd, tcp6(A6, B6, 40000, 80, tcp_flags=0x12)) == ALLOW  # reply
    assert run_once(dp.to_fd, tcp6(B6, A6, 80, 40000, tcp_flags=0x10)) == ALLOW
    assert run_once(dp.to_fd, tcp6(B6, A6, 80, 40000, tcp_flags=0x02)) == DENY  # SYN again
    assert run_once(dp.from_fd, tcp6(B6, A6, 80, 40000, tcp_flags=0x10)) == DENY  # B's leg
    # the same addresses and ports over IPv4 are another flow in another map
    assert run_once(dp.from_fd, packet(A4, B4, TCP, 40000, 80, tcp_flags=0x12)) == DENY
    # ICMPv6 echo: the reply passes on the request's entry, another id does not
    pid = PolicyID("echo", tier="t")
    s.policies[pid] = Policy(
        inbound_rules=(Rule(action="allow", protocol="icmpv6", icmp=ICMPTypeCode(128)),)
    )
    dp.set_policies("lo", s.sources(tiers=(TierInfo("t", (pid,)),)))
    flush_ct(dp)
    assert run_once(dp.to_fd, packet6(A6, B6, ICMP6, icmp_type=128)) == ALLOW
    (entry,) = dp.maps.conntrack()
    assert entry.proto == ICMP6 | 128 << 8 and entry.legs == CT_LEG_B
    assert run_once(dp.from_fd, packet6(B6, A6, ICMP6, icmp_type=129)) == ALLOW
    assert entry.legs & (CT_LEG_A | CT_LEG_B) == CT_LEG_B


def test_ipv6_ip_sets_and_named_ports(dp: BPFDataplane) -> None:
    s = program(dp)
    pid = PolicyID("p", tier="t")
    s.policies[pid] = Policy(
        inbound_rules=(
            Rule(action="allow", src_ip_set_ids=("s:src",), dst_named_port_ip_set_ids=("n:web",)),
        )
    )
    set_members(dp, s, "s:src", {"fd70::/64": True, "10.70.0.0/16": True})
    set_members(dp, s, "n:web", {f"{B6},tcp:8080": True, f"{B4},tcp:8080": True})
    dp.set_policies("lo", s.sources(tiers=(TierInfo("t", (pid,)),)))
    assert to_wep(dp, tcp6(A6, B6, 8080)) == ALLOW
    assert to_wep(dp, packet(A4, B4, TCP, 40000, 8080)) == ALLOW
    assert to_wep(dp, tcp6(C6, B6, 8080)) == DENY  # not in s:src
    assert to_wep(dp, tcp6(A6, B6, 8081)) == DENY  # named port is 8080
    assert to_wep(dp, packet6(A6, B6, UDP, 40000, 8080)) == DENY  # named port is TCP
    # membership changes act at once, without a new program
    set_members(dp, s, "s:src", {"fd71::3/128": True})
    assert to_wep(dp, tcp6(C6, B6, 8080)) == ALLOW
    set_members(dp, s, "s:src", {"fd70::/64": False})
    assert to_wep(dp, tcp6(A6, B6, 8080)) == DENY
    assert to_wep(dp, packet(A4, B4, TCP, 40000, 8080)) == ALLOW  # v4 member untouched


def test_extension_headers(dp: BPFDataplane) -> None:
    """Ports are found behind hop-by-hop/destination options; a non-first fragment has the
    protocol but no ports; more than six extension headers are unsupported (dropped)."""
    program(dp, Rule(action="allow", protocol="tcp", dst_ports=(PortRange(80, 80),)))
    opts = bytes(8)  # next header (filled in), length 0 (8 bytes), padding
    assert to_wep(dp, tcp6(ext=[(HOPOPTS, opts), (DSTOPTS, opts)])) == ALLOW
    assert to_wep(dp, tcp6(dport=81, ext=[(HOPOPTS, opts)])) == DENY
    first = bytes([0, 0, 0x00, 0x01, 0, 0, 0, 1])  # offset 0, more fragments
    later = bytes([0, 0, 0x00, 0xB8, 0, 0, 0, 1])  # offset 23 (x 8 bytes)
    assert to_wep(dp, tcp6(ext=[(FRAGMENT, first)])) == ALLOW
    assert to_wep(dp, tcp6(ext=[(FRAGMENT, later)])) == DENY  # no ports: the port rule fails
    program(dp, Rule(action="allow", protocol="tcp"))
    assert to_wep(dp, tcp6(dport=81, ext=[(FRAGMENT, later)])) == ALLOW  # protocol still seen
    before = (dp.maps.read_counters(1) or {})["egress"]["dropped_unsupported"]
    assert to_wep(dp, tcp6(ext=[(DSTOPTS, opts)] * 6)) == ALLOW
    assert to_wep(dp, tcp6(ext=[(DSTOPTS, opts)] * 7)) == DENY
    after = (dp.maps.read_counters(1) or {})["egress"]["dropped_unsupported"]
    assert after - before == 1


def test_ipv6_host_to_workload_is_not_policed(dp: BPFDataplane) -> None:
    s = PolicyState()
    dp.set_policies("lo", s.sources())  # deny-all both ways
    flush_ct(dp)
    host = bytes.fromhex("fd700000000000000000000000000001")  # A6
    assert run_once(dp.to_fd, tcp6(A6, B6)) == DENY
    dp.maps.hostips6.update(host, (1).to_bytes(4, "little"))
    try:
        assert run_once(dp.to_fd, tcp6(A6, B6)) == ALLOW
        assert run_once(dp.from_fd, tcp6(B6, A6, 40000, 80, tcp_flags=0x12)) == ALLOW
        assert run_once(dp.from_fd, tcp6(B6, A6, 22, 40005)) == DENY  # workload -> host
        assert run_once(dp.to_fd, tcp6(C6, B6)) == DENY
        assert run_once(dp.to_fd, packet("10.70.0.1", B4, TCP, 40000, 80)) == DENY  # v4 map
    finally:
        dp.maps.hostips6.delete(host)


def test_scanner_expires_ipv6_entries(dp: BPFDataplane) -> None:
    s = PolicyState()
    s.profiles["allow"] = Profile(inbound_rules=(Rule(action="allow"),))
    dp.set_policies("lo", s.sources(profile_ids=("allow",)))
    flush_ct(dp)
    assert run_once(dp.to_fd, packet6(A6, B6, UDP, 1000, 53)) == ALLOW
    assert run_once(dp.to_fd, packet6(A6, B6, ICMP6, icmp_type=128)) == ALLOW
    assert run_once(dp.to_fd, packet(A4, B4, UDP, 1000, 53)) == ALLOW
    t = Timeouts()

    def at(offset_s: float) -> int:
        return scan(dp.maps, t, lambda: monotonic_ns() + int(offset_s * 1e9))

    def left() -> list[tuple[str, int]]:
        return sorted((e.addr_a, e.proto & 0xFF) for e in dp.maps.conntrack())

    assert at(9.5) == 0
    assert at(10.5) == 1 and left() == [(A4, UDP), (A6, UDP)]  # ICMPv6: 5 s
    assert at(59) == 0
    assert at(61) == 2 and left() == []


def test_ip_set_members_of_both_families_and_resync(dp: BPFDataplane) -> None:
    from calico.felix.bpf.idalloc import IDAllocator
    from calico.felix.bpf.ipsets import BPFIPSets
    from calico.felix.messages import IPSetType, IPSetUpdate

    for m in (dp.maps.ipsets, dp.maps.ipsets6):
        for key in list(m.keys()):
            m.delete(key)
    first = BPFIPSets(dp.maps, IDAllocator())
    first.on_update(IPSetUpdate("s:mix", ("10.1.0.1", "fd00::1", "fd00:1::/48"), IPSetType.IP))
    first.on_update(IPSetUpdate("s:gone", ("fd00:2::/64",), IPSetType.NET))
    assert (len(list(dp.maps.ipsets.keys())), len(list(dp.maps.ipsets6.keys()))) == (1, 3)
    second = BPFIPSets(dp.maps, IDAllocator())  # "restart"
    second.on_update(IPSetUpdate("s:mix", ("fd00::1",), IPSetType.IP))
    assert second.resync() == 3  # 10.1.0.1, fd00:1::/48, s:gone's member
    assert list(dp.maps.ipsets.keys()) == []
    assert list(dp.maps.ipsets6.keys()) == list(second._members["s:mix"])


def test_ipv6_support_off_drops_ipv6(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Ipv6Support=false (``CALI_IPV6`` 0): IPv6 is dropped as unsupported before policy, even
    ND; IPv4 is untouched."""
    import os

    from bpf_support import private_bpffs

    need_bpf()
    base = str(tmp_path_factory.mktemp("bpf6off"))
    with private_bpffs(base) as mnt:
        d = BPFDataplane(
            os.path.join(mnt, "globals"), os.path.join(base, "cache"), defines={"CALI_IPV6": 0}
        )
        try:
            d.register("lo", 1)
            s = PolicyState()
            s.profiles["allow"] = Profile(inbound_rules=(Rule(action="allow"),))
            d.set_policies("lo", s.sources(profile_ids=("allow",)))
            assert run_once(d.to_fd, tcp6()) == DENY
            assert run_once(d.to_fd, packet6("fe80::1", "ff02::1", ICMP6, icmp_type=135)) == DENY
            assert run_once(d.to_fd, packet(A4, B4, TCP, 40000, 80)) == ALLOW
            counts = (d.maps.read_counters(1) or {})["egress"]
            assert (counts["dropped_unsupported"], counts["accepted_by_policy"]) == (2, 1)
        finally:
            d.close()


def test_calico_bpf_dumps_show_ipv6(dp: BPFDataplane) -> None:
    """``calico bpf conntrack dump`` / ``ipsets dump`` read the v6 maps too."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    calico = str(Path(sys.executable).parent / "calico")

    def dump(*args: str) -> object:
        out = subprocess.run(
            [calico, "bpf", *args, "dump", "--pin-dir", dp.pin_dir, "-o", "json"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    s = program(dp, Rule(action="allow"))
    for m in (dp.maps.ipsets, dp.maps.ipsets6):
        for key in list(m.keys()):
            m.delete(key)
    set_members(dp, s, "s:dump", {"fd70::/64": True, f"{B6},udp:53": True, "10.70.0.0/16": True})
    assert run_once(dp.to_fd, tcp6(A6, B6, 80, 40000)) == ALLOW
    assert run_once(dp.to_fd, packet6(A6, B6, ICMP6, icmp_type=128)) == ALLOW
    flows = dump("conntrack")
    assert isinstance(flows, list)
    got = sorted((f["proto"], f["a"], f["b"], f["flags"]) for f in flows)
    assert got == [
        ("icmpv6", f"[{A6}]:1", f"[{B6}]:1", ["B"]),
        ("tcp", f"[{A6}]:40000", f"[{B6}]:80", ["B"]),
    ]
    sid = s.ids.get_or_alloc("s:dump")
    assert dump("ipsets") == {
        f"0x{sid:016x}": sorted(["10.70.0.0/16", "fd70::/64", f"{B6},udp:53"])
    }
