"""Generated policy programs give the nftables endpoint chain's verdicts (real programs, run by
BPF_PROG_TEST_RUN on crafted packets: main program, conntrack, tail call, policy).

Expected verdicts follow ``calico.felix.rules.endpoints.endpoint_chain`` and
``calico.felix.rules.matches.rule_match``: tier order, pass/next-tier, end-of-tier deny, tier
default action Pass, staged policies ignored, profiles (pass continues), final deny; criteria
ANDed, lists ORed, negations, IP sets, named ports, ICMP type/code, IPv6-only rules left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from bpf_support import PolicyState, dataplane, need_bpf, packet, set_members

from calico.felix.bpf.ctscanner import Timeouts, monotonic_ns, scan
from calico.felix.bpf.dataplane import BPFDataplane
from calico.felix.bpf.libbpf import run_once
from calico.felix.bpf.maps import CT_LEG_A, CT_LEG_B
from calico.felix.messages import ICMPTypeCode, Policy, PolicyID, PortRange, Profile, Rule, TierInfo

pytestmark = pytest.mark.root

A, B, C = "10.70.0.1", "10.70.0.2", "10.70.0.3"
TCP, UDP, ICMP = 6, 17, 1
ALLOW, DENY = -1, 2  # TC_ACT_UNSPEC, TC_ACT_SHOT


@pytest.fixture(scope="module")
def dp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BPFDataplane]:
    need_bpf()
    with dataplane(str(tmp_path_factory.mktemp("bpfsem"))) as d:
        d.register("lo", 1)  # BPF_PROG_TEST_RUN hands the program a loopback skb
        d.set_workload_routes("lo", ("10.70.0.0/24",))  # the test workloads pass from-WEP's RPF
        yield d


def flush_ct(dp: BPFDataplane) -> None:
    for key in list(dp.maps.ct.keys()):
        dp.maps.ct.delete(key)


def verdict(
    dp: BPFDataplane, state: PolicyState, pkt: bytes, *, ingress: bool = True, **ep: Any
) -> int:
    dp.set_policies("lo", state.sources(**ep))
    flush_ct(dp)
    return run_once(dp.to_fd if ingress else dp.from_fd, pkt)


def pol(
    name: str, *rules: Rule, egress: bool = False, staged: bool = False
) -> tuple[PolicyID, Policy]:
    kind = "StagedGlobalNetworkPolicy" if staged else ""
    pid = PolicyID(name, kind=kind, tier="t")
    if egress:
        return pid, Policy(outbound_rules=rules, staged=staged)
    return pid, Policy(inbound_rules=rules, staged=staged)


def tier(name: str, *ids: PolicyID, default: str = "Deny", egress: bool = False) -> TierInfo:
    if egress:
        return TierInfo(name, egress_policies=ids, default_action=default)
    return TierInfo(name, ingress_policies=ids, default_action=default)


def tcp(
    src: str = A, dst: str = B, dport: int = 80, sport: int = 40000, flags: int = 0x02
) -> bytes:
    return packet(src, dst, TCP, sport, dport, tcp_flags=flags)


def test_no_policy_program_drops(dp: BPFDataplane) -> None:
    """An interface with no cpy_iface entry (not registered) drops everything."""
    dp.maps.iface.delete((1).to_bytes(4, "little"))
    try:
        assert run_once(dp.to_fd, tcp()) == DENY
        assert run_once(dp.from_fd, tcp()) == DENY
    finally:
        dp.register("lo", 1)


def test_arp_passes_and_ipv6_drops(dp: BPFDataplane) -> None:
    state = PolicyState()
    dp.set_policies("lo", state.sources())  # deny-all
    arp = b"\xff" * 6 + b"\x02\0\0\0\0\x01" + b"\x08\x06" + b"\0" * 28
    ip6 = b"\xff" * 6 + b"\x02\0\0\0\0\x01" + b"\x86\xdd" + b"\x60" + b"\0" * 39
    assert run_once(dp.to_fd, arp) == ALLOW
    assert run_once(dp.to_fd, ip6) == DENY


def test_profiles_and_final_deny(dp: BPFDataplane) -> None:
    s = PolicyState()
    assert verdict(dp, s, tcp()) == DENY  # nothing at all: deny
    s.profiles["p1"] = Profile(inbound_rules=(Rule(action="allow"),))
    assert verdict(dp, s, tcp(), profile_ids=("p1",)) == ALLOW
    assert verdict(dp, s, tcp(), profile_ids=("missing",)) == DENY  # missing profile = deny
    s.profiles["pass"] = Profile(inbound_rules=(Rule(action="pass"), Rule(action="deny")))
    # nftables: a profile's pass returns to the endpoint chain, which tries the next profile.
    assert verdict(dp, s, tcp(), profile_ids=("pass", "p1")) == ALLOW
    s.profiles["deny"] = Profile(inbound_rules=(Rule(action="deny"),))
    assert verdict(dp, s, tcp(), profile_ids=("deny", "p1")) == DENY
    # egress hook uses outbound rules only
    assert verdict(dp, s, tcp(), ingress=False, profile_ids=("p1",)) == DENY
    assert verdict(dp, s, tcp(), profile_ids=("p1",), admin_down=True) == DENY


def test_tiers_pass_end_of_tier_and_staged(dp: BPFDataplane) -> None:
    s = PolicyState()
    s.profiles["allow"] = Profile(inbound_rules=(Rule(action="allow"),))
    p_pass, s.policies[p_pass] = pol(
        "pass", Rule(action="pass", dst_ports=(PortRange(80, 80),), protocol="tcp")
    )
    p_none, s.policies[p_none] = pol("none", Rule(action="allow", protocol="udp"))
    p_deny, s.policies[p_deny] = pol("deny", Rule(action="deny"))
    p_staged, s.policies[p_staged] = pol("staged", Rule(action="allow"), staged=True)
    prof = ("allow",)
    # pass skips the rest of the tier (the deny policy) and goes on to the profiles
    t1 = tier("t1", p_pass, p_deny)
    assert verdict(dp, s, tcp(dport=80), tiers=(t1,), profile_ids=prof) == ALLOW
    assert verdict(dp, s, tcp(dport=81), tiers=(t1,), profile_ids=prof) == DENY
    # no rule matched in the tier: end-of-tier deny, unless the tier's default action is Pass
    t2 = tier("t2", p_none)
    assert verdict(dp, s, tcp(), tiers=(t2,), profile_ids=prof) == DENY
    t2p = tier("t2", p_none, default="Pass")
    assert verdict(dp, s, tcp(), tiers=(t2p,), profile_ids=prof) == ALLOW
    # a tier with only staged policies does not apply; a staged policy is never enforced
    assert verdict(dp, s, tcp(), tiers=(tier("st", p_staged),), profile_ids=prof) == ALLOW
    assert verdict(dp, s, tcp(), tiers=(tier("st", p_staged, p_none),), profile_ids=()) == DENY
    # first tier's allow wins over a later deny tier; tiers for the other direction are skipped
    p_allow, s.policies[p_allow] = pol("allow", Rule(action="allow"))
    assert verdict(dp, s, tcp(), tiers=(tier("a", p_allow), tier("d", p_deny))) == ALLOW
    assert verdict(dp, s, tcp(), tiers=(tier("e", p_deny, egress=True),), profile_ids=prof) == ALLOW
    # log continues with the next rule
    p_log, s.policies[p_log] = pol("log", Rule(action="log"), Rule(action="allow"))
    assert verdict(dp, s, tcp(), tiers=(tier("l", p_log),)) == ALLOW


def test_rule_criteria(dp: BPFDataplane) -> None:
    s = PolicyState()

    def one(rule: Rule, pkt: bytes) -> int:
        pid, s.policies[pid] = pol("r", rule)
        return verdict(dp, s, pkt, tiers=(tier("t", pid),))

    allow = "allow"
    # protocol / not-protocol
    assert one(Rule(action=allow, protocol="udp"), packet(A, B, UDP, 1, 53)) == ALLOW
    assert one(Rule(action=allow, protocol="udp"), tcp()) == DENY
    assert one(Rule(action=allow, not_protocol="tcp"), tcp()) == DENY
    assert one(Rule(action=allow, not_protocol=17), tcp()) == ALLOW
    # CIDRs: OR within the list, negation any-hit-rejects, exact prefix boundaries
    r = Rule(action=allow, src_net=("10.70.0.0/31", "192.168.0.0/16"))
    assert one(r, tcp(src=A)) == ALLOW
    assert one(r, tcp(src="192.168.255.255")) == ALLOW
    assert one(r, tcp(src=B)) == DENY  # .2 is just outside 10.70.0.0/31
    r = Rule(action=allow, src_net=("10.70.0.2/31",))  # .2 and .3
    assert one(r, tcp(src=A)) == DENY
    assert one(r, tcp(src=C, dst=B)) == ALLOW
    assert one(Rule(action=allow, not_dst_net=("10.70.0.2/32",)), tcp()) == DENY
    assert one(Rule(action=allow, not_dst_net=("10.70.0.3/32",)), tcp()) == ALLOW
    # a rule whose positive nets are all IPv6 cannot match IPv4: left out (-> end-of-tier deny)
    assert one(Rule(action=allow, src_net=("fd00::/8",)), tcp()) == DENY
    assert one(Rule(action=allow, ip_version=6), tcp()) == DENY
    # ports: ranges inclusive at both ends, OR with named-port sets, negations
    r = Rule(action=allow, protocol="tcp", dst_ports=(PortRange(8000, 8080), PortRange(22, 22)))
    assert [one(r, tcp(dport=p)) for p in (7999, 8000, 8080, 8081, 22, 23)] == [
        DENY,
        ALLOW,
        ALLOW,
        DENY,
        ALLOW,
        DENY,
    ]
    r = Rule(action=allow, protocol="tcp", not_src_ports=(PortRange(1, 1023),))
    assert one(r, tcp(sport=1023)) == DENY
    assert one(r, tcp(sport=1024)) == ALLOW
    # ICMP type and type+code
    r = Rule(action=allow, protocol="icmp", icmp=ICMPTypeCode(8))
    assert one(r, packet(A, B, ICMP, icmp_type=8)) == ALLOW
    assert one(r, packet(A, B, ICMP, icmp_type=13)) == DENY
    r = Rule(action=allow, protocol="icmp", icmp=ICMPTypeCode(3, 4))
    assert one(r, packet(A, B, ICMP, icmp_type=3, icmp_code=4)) == ALLOW
    assert one(r, packet(A, B, ICMP, icmp_type=3, icmp_code=3)) == DENY
    r = Rule(action=allow, protocol="icmp", not_icmp=ICMPTypeCode(8))
    assert one(r, packet(A, B, ICMP, icmp_type=8)) == DENY
    assert one(r, packet(A, B, ICMP, icmp_type=0)) == ALLOW


def test_ip_sets(dp: BPFDataplane) -> None:
    s = PolicyState()
    set_members(dp, s, "s:one", {"10.70.0.1/32": True})
    set_members(dp, s, "s:net", {"10.70.0.0/30": True})
    set_members(dp, s, "n:web", {"10.70.0.2,tcp:8080": True})

    def one(rule: Rule, pkt: bytes) -> int:
        pid, s.policies[pid] = pol("r", rule)
        return verdict(dp, s, pkt, tiers=(tier("t", pid),))

    r = Rule(action="allow", src_ip_set_ids=("s:one",))
    assert one(r, tcp(src=A)) == ALLOW
    assert one(r, tcp(src=C)) == DENY
    # several positive src sets: all must contain the source (AND)
    r = Rule(action="allow", src_ip_set_ids=("s:one", "s:net"))
    assert one(r, tcp(src=A)) == ALLOW
    set_members(dp, s, "s:net", {"10.70.0.0/30": False, "10.70.0.2/31": True})
    assert one(r, tcp(src=A)) == DENY  # membership change alone changed the verdict
    assert one(Rule(action="allow", not_src_ip_set_ids=("s:one",)), tcp(src=A)) == DENY
    assert one(Rule(action="allow", not_src_ip_set_ids=("s:one",)), tcp(src=C)) == ALLOW
    # named port: address, protocol and port must all match
    r = Rule(action="allow", protocol="tcp", dst_named_port_ip_set_ids=("n:web",))
    assert one(r, tcp(dport=8080)) == ALLOW
    assert one(r, tcp(dport=8081)) == DENY
    assert one(r, packet(A, B, UDP, 1, 8080)) == DENY
    # numeric ports OR named ports
    r = Rule(
        action="allow",
        protocol="tcp",
        dst_ports=(PortRange(80, 80),),
        dst_named_port_ip_set_ids=("n:web",),
    )
    assert [one(r, tcp(dport=p)) for p in (80, 8080, 81)] == [ALLOW, ALLOW, DENY]


def test_conntrack_legs_and_replies(dp: BPFDataplane) -> None:
    """Allow creates the entry approving this hook's leg; replies then pass without policy;
    a SYN is always re-policed; the other leg's approval alone does not let traffic in."""
    s = PolicyState()
    s.profiles["allow"] = Profile(
        inbound_rules=(Rule(action="allow"),), outbound_rules=(Rule(action="allow"),)
    )
    s.profiles["none"] = Profile()
    # to-WEP (pod ingress) allows A -> B: B's leg (dst) approved
    dp.set_policies("lo", s.sources(profile_ids=("allow",)))
    flush_ct(dp)
    assert run_once(dp.to_fd, tcp(A, B, 80, 40000)) == ALLOW
    (entry,) = dp.maps.conntrack()
    assert (entry.addr_a, entry.port_a, entry.addr_b, entry.port_b) == (A, 40000, B, 80)
    assert entry.legs == CT_LEG_B
    # now deny everything: the reply B -> A at from-WEP (B's leg = src, approved) still passes
    dp.set_policies("lo", s.sources(profile_ids=("none",)))
    assert run_once(dp.from_fd, tcp(B, A, 40000, 80, flags=0x12)) == ALLOW
    # the established forward direction at to-WEP passes (non-SYN) ...
    assert run_once(dp.to_fd, tcp(A, B, 80, 40000, flags=0x10)) == ALLOW
    # ... but a SYN is re-policed and now denied
    assert run_once(dp.to_fd, tcp(A, B, 80, 40000, flags=0x02)) == DENY
    # from-WEP for A -> B needs A's leg, which nobody approved: policy runs, denies
    assert run_once(dp.from_fd, tcp(A, B, 80, 40000, flags=0x10)) == DENY
    # canonical key: same entry whichever direction created it
    dp.set_policies("lo", s.sources(profile_ids=("allow",)))
    assert run_once(dp.from_fd, tcp(A, B, 80, 40000, flags=0x10)) == ALLOW
    (entry,) = dp.maps.conntrack()
    assert entry.legs & (CT_LEG_A | CT_LEG_B) == CT_LEG_A | CT_LEG_B


def test_icmp_queries_are_flows_of_their_own(dp: BPFDataplane) -> None:
    """An allowed echo request lets its reply back, but not a timestamp request (as Linux
    conntrack, which nftables relies on: each ICMP query type and id is its own flow)."""
    s = PolicyState()
    pid, s.policies[pid] = pol("echo", Rule(action="allow", protocol="icmp", icmp=ICMPTypeCode(8)))
    s.profiles["none"] = Profile()
    dp.set_policies("lo", s.sources(tiers=(tier("t", pid),)))
    flush_ct(dp)
    echo = packet(A, B, ICMP, icmp_type=8)
    assert run_once(dp.to_fd, echo) == ALLOW
    (entry,) = dp.maps.conntrack()
    assert entry.proto == ICMP | 8 << 8 and entry.port_a == entry.port_b == 1  # id 1
    # the echo reply comes back through from-WEP on the same entry (B's leg approved)
    assert run_once(dp.from_fd, packet(B, A, ICMP, icmp_type=0)) == ALLOW
    assert run_once(dp.to_fd, packet(A, B, ICMP, icmp_type=13)) == DENY


def test_conntrack_scanner_expires_by_state(dp: BPFDataplane) -> None:
    """UDP 60 s, TCP established 1 h, TCP half-open (SYN sent) 20 s, ICMP 5 s, grace 10 s."""
    s = PolicyState()
    s.profiles["allow"] = Profile(inbound_rules=(Rule(action="allow"),))
    dp.set_policies("lo", s.sources(profile_ids=("allow",)))
    flush_ct(dp)
    assert run_once(dp.to_fd, packet(A, B, UDP, 1000, 53)) == ALLOW
    assert run_once(dp.to_fd, tcp(A, B, 80, 40001)) == ALLOW  # only B's leg: "SYN sent"
    assert run_once(dp.to_fd, packet(A, B, ICMP, icmp_type=8)) == ALLOW
    t = Timeouts()

    def at(offset_s: float) -> int:
        return scan(dp.maps, t, lambda: monotonic_ns() + int(offset_s * 1e9))

    def protos() -> list[int]:
        return sorted(e.proto & 0xFF for e in dp.maps.conntrack())

    assert at(9.5) == 0  # inside the creation grace period, even ICMP stays
    assert at(10.5) == 1 and protos() == [TCP, UDP]  # ICMP (5 s) went
    assert at(19) == 0
    assert at(21) == 1 and protos() == [UDP]  # half-open TCP (20 s)
    assert at(59) == 0
    assert at(61) == 1 and protos() == []
    # an established TCP flow (both legs) lives for TCPEstablished
    assert run_once(dp.to_fd, tcp(A, B, 80, 40002)) == ALLOW
    assert run_once(dp.from_fd, tcp(A, B, 80, 40002, flags=0x10)) == DENY  # A's leg: egress
    s.profiles["allow"] = Profile(
        inbound_rules=(Rule(action="allow"),), outbound_rules=(Rule(action="allow"),)
    )
    dp.set_policies("lo", s.sources(profile_ids=("allow",)))
    assert run_once(dp.from_fd, tcp(A, B, 80, 40002, flags=0x10)) == ALLOW
    assert at(3000) == 0
    assert at(3601) == 1


def test_conntrack_timeouts_config() -> None:
    t = Timeouts.parse({"UDPTimeout": "5s", "TCPEstablished": "2h", "TCPFinsSeen": "Auto"})
    assert (t.udp, t.tcp_established, t.icmp) == (5.0, 7200.0, 5.0)
    with pytest.raises(ValueError, match="unknown BPFConntrackTimeouts key 'Bogus'"):
        Timeouts.parse({"Bogus": "1s"})
    with pytest.raises(ValueError, match="UDPTimeout"):
        Timeouts.parse({"UDPTimeout": "soon"})
    with pytest.raises(ValueError, match="Auto is only valid for TCPFinsSeen"):
        Timeouts.parse({"UDPTimeout": "Auto"})


def test_ip_set_resync_drops_only_stale_inherited_entries(dp: BPFDataplane) -> None:
    """A restarted Felix finds the pinned set map full: sets re-sent keep their entries,
    members and sets nobody re-sends are deleted at the first resync."""
    from calico.felix.bpf.idalloc import IDAllocator
    from calico.felix.bpf.ipsets import BPFIPSets
    from calico.felix.messages import IPSetDeltaUpdate, IPSetType, IPSetUpdate

    for key in list(dp.maps.ipsets.keys()):
        dp.maps.ipsets.delete(key)
    first = BPFIPSets(dp.maps, IDAllocator())
    first.on_update(IPSetUpdate("s:keep", ("10.1.0.1", "10.1.0.2"), IPSetType.IP))
    first.on_update(IPSetUpdate("s:gone", ("10.2.0.0/16",), IPSetType.NET))
    assert len(list(dp.maps.ipsets.keys())) == 3
    second = BPFIPSets(dp.maps, IDAllocator())  # "restart"
    second.on_update(IPSetUpdate("s:keep", ("10.1.0.1",), IPSetType.IP))
    assert len(list(dp.maps.ipsets.keys())) == 3  # nothing deleted before the resync
    assert second.resync() == 2
    assert second.resync() == 0  # only once
    keys = list(dp.maps.ipsets.keys())
    assert keys == [k for k in second._members["s:keep"]]
    second.on_update(IPSetDeltaUpdate("s:keep", added_members=("10.1.0.3",)))
    assert len(list(dp.maps.ipsets.keys())) == 2


def test_host_to_workload_is_not_policed(dp: BPFDataplane) -> None:
    """As nftables' cali-OUTPUT: packets to a workload from a host address skip its ingress
    policy (only at to-WEP: the workload's own egress to that address is still policed), and
    the replies pass through conntrack."""
    s = PolicyState()
    dp.set_policies("lo", s.sources())  # deny-all both ways
    flush_ct(dp)
    host = bytes([10, 70, 0, 1])
    assert run_once(dp.to_fd, tcp(A, B)) == DENY
    dp.maps.hostips.update(host, (1).to_bytes(4, "little"))
    try:
        assert run_once(dp.to_fd, tcp(A, B)) == ALLOW
        assert run_once(dp.from_fd, tcp(B, A, 40000, 80, flags=0x12)) == ALLOW  # the reply
        assert run_once(dp.from_fd, tcp(B, A, 22, 40005)) == DENY  # workload -> host: policed
        assert run_once(dp.to_fd, tcp(C, B)) == DENY  # not a host address
    finally:
        dp.maps.hostips.delete(host)
