"""The host endpoint programs run by BPF_PROG_TEST_RUN on crafted packets: no host endpoint =
allow, failsafe ports ahead of policy (exact port/protocol/net/direction boundaries, to and
from the host only), the host-vs-forwarded split, applyOnForward, pre-DNAT, untracked policy
(no conntrack entry) and the HEP conntrack legs (replies of an allowed flow pass)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

import pytest
from bpf_support import PolicyState, dataplane, need_bpf, packet, packet6

from calico.felix.bpf import failsafes
from calico.felix.bpf.dataplane import BPFDataplane
from calico.felix.bpf.libbpf import run_once
from calico.felix.bpf.maps import FSAFE_KEY, IFACE_HEP, IFACE_VALUE, PROG_FD
from calico.felix.bpf.polprog import EndpointPolicy, Generator
from calico.felix.config.netparsers import PortListParser
from calico.felix.messages import Policy, PolicyID, PortRange, Profile, Rule, TierInfo

pytestmark = pytest.mark.root

HOST, REMOTE, OTHER = "10.71.0.1", "10.71.0.2", "10.72.0.9"
HOST6, REMOTE6 = "fd71::1", "fd71::2"
TCP, UDP = 6, 17
ALLOW, DENY = -1, 2  # TC_ACT_UNSPEC, TC_ACT_SHOT
INBOUND = "tcp:22,udp:68,tcp:10.71.0.0/24:5000,tcp:[fd71::/64]:5001"
OUTBOUND = "udp:53,tcp:179"


@pytest.fixture(scope="module")
def dp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BPFDataplane]:
    need_bpf()
    # RPF off: BPF_PROG_TEST_RUN packets have no ingress interface for the FIB lookup
    # (BPFEnforceRPF is tested with real packets in test_bpf_hep_rpf.py).
    with dataplane(str(tmp_path_factory.mktemp("bpfhepsem")), defines={"CALI_RPF": 0}) as d:
        d.register("lo", 1)  # BPF_PROG_TEST_RUN hands the program a loopback skb
        d.set_workload_routes("lo", ("10.73.0.5/32", "fd73::5/128"))  # the pod: from-WEP RPF
        parse = PortListParser().parse
        failsafes.sync(d.maps, failsafes.failsafe_keys(parse(INBOUND), parse(OUTBOUND)))
        one = (1).to_bytes(4, "little")
        d.maps.hostips.update(ipaddress.IPv4Address(HOST).packed, one)
        d.maps.hostips6.update(ipaddress.IPv6Address(HOST6).packed, one)
        yield d


def flush_ct(dp: BPFDataplane) -> None:
    for m in (dp.maps.ct, dp.maps.ct6):
        for key in list(m.keys()):
            m.delete(key)


def hep_sources(state: PolicyState, **kw: Any) -> dict[str, str]:
    gen = Generator(state.policies, state.profiles, state.ids.get_or_alloc)
    out = {}
    for hook, inbound in (("ingress", True), ("egress", False)):
        ep = EndpointPolicy(
            kw.get("tiers", ()),
            kw.get("profile_ids", ()),
            inbound,
            host=True,
            untracked_tiers=kw.get("untracked", ()),
            pre_dnat_tiers=kw.get("pre_dnat", ()),
            forward_tiers=kw.get("forward", ()),
        )
        out[hook] = gen.source(ep)
    return out


def program(dp: BPFDataplane, state: PolicyState, **kw: Any) -> None:
    dp.set_policies("lo", hep_sources(state, **kw), hep=True)
    flush_ct(dp)


def syn(src: str, dst: str, dport: int, proto: int = TCP, sport: int = 40000) -> bytes:
    return packet(src, dst, proto, sport, dport, tcp_flags=0x02)


def inbound(dp: BPFDataplane, pkt: bytes) -> int:
    return run_once(dp.from_hep_fd, pkt)


def outbound(dp: BPFDataplane, pkt: bytes) -> int:
    return run_once(dp.to_hep_fd, pkt)


def test_no_host_endpoint_allows_everything(dp: BPFDataplane) -> None:
    """No cpy_iface entry (a data interface without a host endpoint): all passes, nothing is
    tracked; non-IP frames pass on HEPs too (a WEP drops them)."""
    dp.clear_policies("lo")
    flush_ct(dp)
    assert inbound(dp, syn(REMOTE, HOST, 8080)) == ALLOW
    assert outbound(dp, syn(HOST, REMOTE, 8080)) == ALLOW
    assert list(dp.maps.ct.keys()) == []
    other = bytearray(syn(REMOTE, HOST, 80))
    other[12:14] = b"\x88\xcc"  # LLDP
    assert inbound(dp, bytes(other)) == ALLOW
    assert run_once(dp.to_fd, bytes(other)) == DENY


def test_failsafe_boundaries(dp: BPFDataplane) -> None:
    """A deny-all HEP (no policy, no profile; an applyOnForward policy that matches nothing)
    still passes failsafe ports: inbound ones to the host only, matching port, protocol and
    the entry's net; outbound ones from the host; each direction's list applies to its own
    hook only."""
    state = PolicyState()
    none = PolicyID("nothing", tier="t")
    state.policies[none] = Policy()
    fwd = (TierInfo("t", ingress_policies=(none,), egress_policies=(none,)),)
    program(dp, state, forward=fwd)
    assert inbound(dp, syn(REMOTE, HOST, 22)) == ALLOW
    assert inbound(dp, syn(REMOTE, HOST, 21)) == DENY
    assert inbound(dp, syn(REMOTE, HOST, 23)) == DENY
    assert inbound(dp, syn(REMOTE, HOST, 22, UDP)) == DENY  # tcp:22 only
    assert inbound(dp, syn(REMOTE, HOST, 68, UDP)) == ALLOW
    assert inbound(dp, syn(REMOTE, HOST, 68, TCP)) == DENY
    assert inbound(dp, syn(REMOTE, OTHER, 22)) == DENY  # forwarded, not to the host
    assert inbound(dp, syn(REMOTE, HOST, 179)) == DENY  # an outbound failsafe
    assert inbound(dp, syn(REMOTE, HOST, 5000)) == ALLOW  # 10.71.0.0/24 only
    assert inbound(dp, syn(OTHER, HOST, 5000)) == DENY
    assert outbound(dp, syn(HOST, REMOTE, 179)) == ALLOW
    assert outbound(dp, syn(HOST, REMOTE, 53, UDP)) == ALLOW
    assert outbound(dp, syn(HOST, REMOTE, 53, TCP)) == DENY
    assert outbound(dp, syn(HOST, REMOTE, 22)) == DENY  # an inbound failsafe
    assert outbound(dp, syn(OTHER, REMOTE, 179)) == DENY  # forwarded, not from the host
    # IPv6: the same map layout, /64 net
    p6 = packet6(REMOTE6, HOST6, TCP, 40000, 22)
    assert inbound(dp, p6) == ALLOW
    assert inbound(dp, packet6(REMOTE6, HOST6, TCP, 40000, 5001)) == ALLOW
    assert inbound(dp, packet6("fd72::2", HOST6, TCP, 40000, 5001)) == DENY
    assert inbound(dp, packet6(REMOTE6, HOST6, TCP, 40000, 8080)) == DENY
    # a failsafe flow is tracked: its replies pass the other hook
    flush_ct(dp)
    assert inbound(dp, syn(REMOTE, HOST, 22)) == ALLOW
    assert outbound(dp, packet(HOST, REMOTE, TCP, 22, 40000, tcp_flags=0x12)) == ALLOW
    counters = dp.maps.read_counters(1)
    assert counters is not None and counters["ingress"]["accepted_failsafe"] >= 1


def test_failsafe_sync_replaces_entries(dp: BPFDataplane) -> None:
    """The map holds exactly the configured entries: a re-sync drops ones no longer listed."""
    parse = PortListParser().parse
    keys = failsafes.failsafe_keys(parse("tcp:2222"), ())
    try:
        added, removed = failsafes.sync(dp.maps, keys)
        assert added == 2  # v4 and v6 catch-alls
        assert removed > 0
        assert {len(k) for k in dp.maps.fsafes.keys()} == {FSAFE_KEY.size}  # noqa: SIM118
        program(dp, PolicyState())
        assert inbound(dp, syn(REMOTE, HOST, 22)) == DENY
        assert inbound(dp, syn(REMOTE, HOST, 2222)) == ALLOW
        assert failsafes.sync(dp.maps, keys) == (0, 0)
    finally:
        failsafes.sync(dp.maps, failsafes.failsafe_keys(parse(INBOUND), parse(OUTBOUND)))


def test_host_and_forwarded_traffic_take_their_sections(dp: BPFDataplane) -> None:
    """Normal policy for traffic to/from the host, applyOnForward policy for forwarded
    traffic (allowed when there is none); the tracked flow's replies pass."""
    state = PolicyState()
    pid = PolicyID("web", tier="t")
    state.policies[pid] = Policy(
        inbound_rules=(Rule(action="allow", protocol="tcp", dst_net=(f"{HOST}/32",)),)
    )
    tiers = (TierInfo("t", ingress_policies=(pid,)),)
    program(dp, state, tiers=tiers)
    assert inbound(dp, syn(REMOTE, HOST, 8080)) == ALLOW
    assert inbound(dp, syn(REMOTE, HOST, 8080, UDP)) == DENY  # end of tier
    assert inbound(dp, syn(REMOTE, OTHER, 8080, UDP)) == ALLOW  # forwarded: no fwd policy
    assert outbound(dp, syn(HOST, REMOTE, 8080)) == DENY  # no egress policy, no profile
    assert outbound(dp, syn(OTHER, REMOTE, 8080)) == ALLOW  # forwarded
    # replies of the allowed inbound flow pass to-HEP (conntrack, the remote's leg)
    flush_ct(dp)
    assert inbound(dp, syn(REMOTE, HOST, 8080)) == ALLOW
    assert outbound(dp, packet(HOST, REMOTE, TCP, 8080, 40000, tcp_flags=0x12)) == ALLOW
    # applyOnForward policy: forwarded traffic is policed, end-of-tier deny
    fid = PolicyID("fwd", tier="t")
    state.policies[fid] = Policy(inbound_rules=(Rule(action="allow", protocol="udp"),))
    fwd = (TierInfo("t", ingress_policies=(fid,)),)
    program(dp, state, tiers=tiers, forward=fwd)
    assert inbound(dp, syn(REMOTE, OTHER, 8080, UDP)) == ALLOW
    assert inbound(dp, syn(REMOTE, OTHER, 8080, TCP)) == DENY
    assert outbound(dp, syn(OTHER, REMOTE, 8080, TCP)) == ALLOW  # no egress fwd policy


def test_pre_dnat_and_untracked(dp: BPFDataplane) -> None:
    """Pre-DNAT (ingress only) decides by its rules and otherwise continues; its allow skips
    normal policy. Untracked allow passes without a conntrack entry; its deny drops; a
    non-matching packet continues to the tracked policy."""
    state = PolicyState()
    pd = PolicyID("pd", tier="t")
    state.policies[pd] = Policy(
        inbound_rules=(
            Rule(action="deny", protocol="tcp", src_net=(f"{OTHER}/32",)),
            Rule(action="allow", protocol="tcp", dst_ports=(_port(7000),)),
        )
    )
    nt = PolicyID("nt", tier="t")
    state.policies[nt] = Policy(
        inbound_rules=(
            Rule(action="allow", protocol="udp", dst_ports=(_port(9000),)),
            Rule(action="deny", protocol="udp", dst_ports=(_port(9001),)),
        ),
        outbound_rules=(Rule(action="allow", protocol="udp", src_ports=(_port(9000),)),),
    )
    program(
        dp,
        state,
        pre_dnat=(TierInfo("t", ingress_policies=(pd,)),),
        untracked=(TierInfo("t", ingress_policies=(nt,), egress_policies=(nt,)),),
    )
    assert inbound(dp, syn(REMOTE, HOST, 7000)) == ALLOW  # pre-DNAT allow, normal denies
    assert inbound(dp, syn(OTHER, "10.73.0.1", 7000)) == DENY  # pre-DNAT deny, forwarded too
    assert inbound(dp, syn(REMOTE, HOST, 7001)) == DENY  # no match: normal policy denies
    assert outbound(dp, syn(HOST, REMOTE, 7000)) == DENY  # pre-DNAT is ingress only
    flush_ct(dp)
    assert inbound(dp, syn(REMOTE, HOST, 9000, UDP)) == ALLOW
    assert list(dp.maps.ct.keys()) == []  # untracked: no entry
    assert inbound(dp, syn(REMOTE, HOST, 9001, UDP)) == DENY
    assert outbound(dp, packet(HOST, REMOTE, UDP, 9000, 40000)) == ALLOW
    assert outbound(dp, packet(HOST, REMOTE, UDP, 9002, 40000)) == DENY
    assert list(dp.maps.ct.keys()) == []


def test_iface_entry_is_flagged_hep(dp: BPFDataplane) -> None:
    program(dp, PolicyState())
    raw = dp.maps.iface.lookup(PROG_FD.pack(1))
    assert raw is not None
    flags, ing, egr = IFACE_VALUE.unpack(raw)
    assert flags & IFACE_HEP and ing == egr == dp.slot("lo")
    dp.clear_policies("lo")
    assert dp.maps.iface.lookup(PROG_FD.pack(1)) is None
    assert dp.slot("lo") is None
    assert inbound(dp, syn(REMOTE, HOST, 8080)) == ALLOW


def _port(n: int) -> PortRange:
    return PortRange(n, n)


def wep_sources(
    state: PolicyState,
    pre_dnat: tuple[TierInfo, ...] = (),
    forward: tuple[TierInfo, ...] = (),
    profile_ids: tuple[str, ...] = ("all",),
) -> dict[str, str]:
    """A workload's programs while a ``*`` host endpoint with these tiers exists."""
    gen = Generator(state.policies, state.profiles, state.ids.get_or_alloc)
    out = {}
    for hook, inbound in (("ingress", False), ("egress", True)):
        ep = EndpointPolicy(
            (), profile_ids, inbound, wild_pre_dnat_tiers=pre_dnat, wild_forward_tiers=forward
        )
        out[hook] = gen.source(ep)
    return out


def test_all_interfaces_hep_on_workload_hooks(dp: BPFDataplane) -> None:
    """The ``*`` host endpoint on a workload's hooks, as upstream's BPF mode: leaving the pod
    = the host endpoint's ingress (pre-DNAT for every packet, then applyOnForward if
    forwarded), entering it = its egress (applyOnForward); traffic between the pod and the
    host itself never takes the host endpoint's normal or forward policy; the workload's own
    policy still decides after a host allow. Both families."""
    pod, pod6 = "10.73.0.5", "fd73::5"
    state = PolicyState()
    state.profiles["all"] = Profile(inbound_rules=(Rule(action="allow"),),
                                    outbound_rules=(Rule(action="allow"),))  # fmt: skip
    state.profiles["none"] = Profile()
    pd, fw = PolicyID("pd", tier="t"), PolicyID("fw", tier="t")
    deny99 = Rule(action="deny", protocol="tcp", dst_ports=(PortRange(99, 99),))
    state.policies[pd] = Policy(inbound_rules=(deny99,), pre_dnat=True)
    state.policies[fw] = Policy(
        inbound_rules=(Rule(action="allow", protocol="tcp", dst_ports=(PortRange(80, 80),)),),
        outbound_rules=(Rule(action="allow", src_net=(f"{REMOTE}/32", f"{REMOTE6}/128")),),
        apply_on_forward=True,
    )
    pre = (TierInfo("t", ingress_policies=(pd,)),)
    fwd = (TierInfo("t", ingress_policies=(fw,), egress_policies=(fw,)),)

    def out(src: str, dst: str, dport: int) -> int:  # from-WEP: leaving the pod
        pkt = packet6(src, dst, TCP, 40000, dport) if ":" in src else syn(src, dst, dport)
        return run_once(dp.from_fd, pkt)

    def into(src: str, dst: str, dport: int) -> int:  # to-WEP
        pkt = packet6(src, dst, TCP, 40000, dport) if ":" in src else syn(src, dst, dport)
        return run_once(dp.to_fd, pkt)

    dp.set_policies("lo", wep_sources(state, pre, fwd))
    flush_ct(dp)
    for p, host, remote in ((pod, HOST, REMOTE), (pod6, HOST6, REMOTE6)):
        assert out(p, remote, 80) == ALLOW  # forward ingress policy allows port 80
        assert out(p, remote, 81) == DENY  # ... and nothing else (end of tier)
        assert out(p, host, 81) == ALLOW  # to the host: no host policy, the profile allows
        assert out(p, host, 99) == DENY  # pre-DNAT applies to host-bound traffic too
        assert out(p, remote, 99) == DENY
        assert into(remote, p, 81) == ALLOW  # forward egress policy: from REMOTE only
        assert into(host, p, 81) == ALLOW  # the host's own traffic: allowed before policy
    assert into(OTHER, pod, 81) == DENY
    # A host allow only lets the workload's own policy decide.
    dp.set_policies("lo", wep_sources(state, pre, fwd, profile_ids=("none",)))
    flush_ct(dp)
    assert out(pod, REMOTE, 80) == DENY
    assert into(REMOTE, pod, 81) == DENY
    # No ``*`` endpoint: workload policy only.
    dp.set_policies("lo", wep_sources(state))
    flush_ct(dp)
    assert out(pod, REMOTE, 81) == ALLOW
    assert out(pod, HOST, 99) == ALLOW
    assert into(OTHER, pod, 81) == ALLOW
