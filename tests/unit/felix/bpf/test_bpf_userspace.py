"""BPF dataplane userspace without a kernel: policy generation decisions, map key encodings,
IP set ids, the fallback when BPF cannot run."""

from __future__ import annotations

import hashlib
import logging
import struct

import pytest

from calico.felix.bpf import bpffs, mode
from calico.felix.bpf.idalloc import IDAllocator
from calico.felix.bpf.maps import (
    CT6_KEY,
    CT_KEY,
    IPSET6_KEY,
    IPSET_KEY,
    ct_key,
    decode_ct,
    ipset6_key,
    ipset_key,
)
from calico.felix.bpf.polprog import EndpointPolicy, Generator
from calico.felix.messages import ICMPTypeCode, Policy, PolicyID, PortRange, Profile, Rule, TierInfo
from calico.felix.rules.policy import short_kind


def gen(**policies: Policy) -> Generator:
    ids = IDAllocator()
    return Generator({PolicyID(k, tier="t"): v for k, v in policies.items()}, {}, ids.get_or_alloc)


def test_rules_that_cannot_match_ipv4_are_left_out() -> None:
    g = gen()
    assert g.rule_conditions(Rule(action="allow", ip_version=6)) is None
    assert g.rule_conditions(Rule(action="allow", protocol="icmpv6")) is None
    assert g.rule_conditions(Rule(action="allow", src_net=("fd00::/8",))) is None
    # a mixed list keeps its IPv4 part; an IPv6-only negation is dropped, not the rule
    conds = g.rule_conditions(Rule(action="allow", src_net=("fd00::/8", "10.0.0.0/8")))
    assert conds == ["(((st->ip_src & 0x000000ff) == 0x0000000a))"]
    assert g.rule_conditions(Rule(action="allow", not_dst_net=("fd00::/8",))) == []


def test_rules_that_cannot_match_ipv6_are_left_out_of_the_v6_walk() -> None:
    g = gen()
    assert g.rule_conditions(Rule(action="allow", ip_version=4), 6) is None
    assert g.rule_conditions(Rule(action="allow", protocol="icmp"), 6) is None
    assert g.rule_conditions(Rule(action="allow", src_net=("10.0.0.0/8",)), 6) is None
    assert g.rule_conditions(Rule(action="allow", ip_version=6), 6) == []
    assert g.rule_conditions(Rule(action="allow", protocol="icmpv6"), 6) == ["st->proto == 58"]
    conds = g.rule_conditions(Rule(action="allow", src_net=("fd00::/8", "10.0.0.0/8")), 6)
    assert conds == ["(((st->ip6_src[0] & 0x000000ff) == 0x000000fd))"]
    assert g.rule_conditions(Rule(action="allow", not_dst_net=("10.0.0.0/8",)), 6) == []


def test_ipv6_criteria_rendering_boundaries() -> None:
    g = gen()
    # /128: all four words; /64: two whole words; /33: a whole word and one masked bit
    (c128,) = g.rule_conditions(Rule(action="allow", dst_net=("fd00::1/128",)), 6) or []
    assert c128 == (
        "((st->ip6_dst[0] == 0x000000fd && st->ip6_dst[1] == 0x00000000 && "
        "st->ip6_dst[2] == 0x00000000 && st->ip6_dst[3] == 0x01000000))"
    )
    (c64,) = g.rule_conditions(Rule(action="allow", src_net=("fd00:1:2:3::/64",)), 6) or []
    assert c64 == "((st->ip6_src[0] == 0x010000fd && st->ip6_src[1] == 0x03000200))"
    (c33,) = g.rule_conditions(Rule(action="allow", src_net=("2001:db8:8000::/33",)), 6) or []
    assert c33 == "((st->ip6_src[0] == 0xb80d0120 && (st->ip6_src[1] & 0x00000080) == 0x00000080))"
    assert g.rule_conditions(Rule(action="allow", src_net=("::/0",)), 6) == ["((1))"]
    conds = g.rule_conditions(Rule(action="allow", protocol="icmpv6", icmp=ICMPTypeCode(128, 0)), 6)
    assert conds == ["st->proto == 58", "(st->icmp_type == 128 && st->icmp_code == 0)"]
    with pytest.raises(ValueError, match="ICMP type match needs protocol"):
        g.rule_conditions(Rule(action="allow", icmp=ICMPTypeCode(128)), 6)
    # IP sets: the v6 LPM lookup on the v6 addresses
    (cset,) = g.rule_conditions(Rule(action="allow", src_ip_set_ids=("s:a",)), 6) or []
    assert cset.startswith("cali_ipset6_has(") and "st->ip6_src, CALI_SRC_PORT(st)" in cset


def test_criteria_rendering_boundaries() -> None:
    g = gen()
    conds = g.rule_conditions(
        Rule(
            action="allow",
            protocol="tcp",
            src_net=("192.168.1.128/25",),
            dst_ports=(PortRange(80, 80), PortRange(1000, 2000)),
        )
    )
    assert conds == [
        "st->proto == 6",
        "(((st->ip_src & 0x80ffffff) == 0x8001a8c0))",
        "((st->has_ports && (st->dport == 80 || (st->dport >= 1000 && st->dport <= 2000))))",
    ]
    assert g.rule_conditions(Rule(action="allow", src_net=("0.0.0.0/0",))) == [
        "(((st->ip_src & 0x00000000) == 0x00000000))"
    ]
    conds = g.rule_conditions(Rule(action="allow", protocol="icmp", not_icmp=ICMPTypeCode(3, 1)))
    assert conds == ["st->proto == 1", "!((st->icmp_type == 3 && st->icmp_code == 1))"]


def test_bad_rules_raise_clear_errors() -> None:
    g = gen()
    with pytest.raises(ValueError, match="ICMP type match needs protocol"):
        g.rule_conditions(Rule(action="allow", icmp=ICMPTypeCode(8)))
    with pytest.raises(ValueError, match="unknown protocol"):
        g.rule_conditions(Rule(action="allow", protocol="bogus"))
    g = gen(p=Policy(inbound_rules=(Rule(action="frobnicate"),)))
    ep = EndpointPolicy((TierInfo("t", ingress_policies=(PolicyID("p", tier="t"),)),), (), True)
    with pytest.raises(ValueError, match="unknown rule action 'frobnicate'"):
        g.source(ep)


def test_program_structure_follows_the_endpoint_chain() -> None:
    pid, staged = PolicyID("p", tier="t"), PolicyID("s", kind="StagedNetworkPolicy", tier="t")
    g = Generator(
        {pid: Policy(inbound_rules=(Rule(action="allow"),)), staged: Policy()},
        {"prof": Profile(inbound_rules=(Rule(action="pass"),))},
        IDAllocator().get_or_alloc,
    )
    tiers = (
        TierInfo("t", ingress_policies=(pid,)),
        TierInfo("onlystaged", ingress_policies=(staged,)),
        TierInfo("passes", ingress_policies=(pid,), default_action="Pass"),
        TierInfo("egressonly", egress_policies=(pid,)),
    )
    src = g.source(EndpointPolicy(tiers, ("prof",), True))
    # t only (once per family): staged-only and egress tiers vanish
    assert src.count("/* end of tier") == 2
    assert "tier onlystaged" not in src and "tier egressonly" not in src
    for v in (4, 6):  # profile pass continues with the next profile
        assert f"goto v{v}_pro0_end;" in src
    # one subprogram per family, each with its own exits, dispatched on the packet's family
    v4, v6 = src.index("int cali_walk_v4("), src.index("int cali_walk_v6(")
    assert v4 < src.index("v4_allow:") < src.index("v4_deny:") < v6 < src.index("v6_allow:")
    assert "\tif (st->ip_ver == 6)\n\t\treturn cali_walk_v6(skb, st);\n" in src
    assert src.rstrip().endswith('char _license[] SEC("license") = "GPL";')
    down = g.source(EndpointPolicy((), (), True, True))
    assert "goto v4_deny; /* endpoint admin down */" in down
    assert "goto v6_deny; /* endpoint admin down */" in down


def test_ct_key_is_canonical() -> None:
    k1 = ct_key(6, "10.0.0.1", "10.0.0.2", 40000, 80)
    assert k1 == ct_key(6, "10.0.0.2", "10.0.0.1", 80, 40000)
    proto, a, b, pa, pb = CT_KEY.unpack(k1)
    assert (proto, a, b, pa, pb) == (6, bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]), 40000, 80)
    # addresses compare as little-endian integers of their network-order bytes:
    # 1.0.0.2 (0x0200_0001) > 2.0.0.1 (0x0100_0002), so 2.0.0.1 is side A
    _, a, _, _, _ = CT_KEY.unpack(ct_key(17, "1.0.0.2", "2.0.0.1", 1, 2))
    assert a == bytes([2, 0, 0, 1])
    # equal addresses: lower port first; equal ports too: the source is side B
    _, _, _, pa, pb = CT_KEY.unpack(ct_key(17, "10.0.0.1", "10.0.0.1", 9, 5))
    assert (pa, pb) == (5, 9)


def test_ct6_key_is_canonical_and_decodes() -> None:
    k = ct_key(6, "fd00::2", "fd00::1", 80, 40000)
    assert len(k) == CT6_KEY.size == 40 and k == ct_key(6, "fd00::1", "fd00::2", 40000, 80)
    _, a, b, pa, pb = CT6_KEY.unpack(k)
    assert (a[-1], b[-1], pa, pb) == (1, 2, 40000, 80)
    # word 0 decides first, compared as a native (little-endian) integer of NBO bytes:
    # 0100:: (word 0x0001) < 0001:: (word 0x0100)
    _, a, _, _, _ = CT6_KEY.unpack(ct_key(17, "1::", "100::", 1, 2))
    assert a[:2] == b"\x01\x00"
    # only the last word differs
    _, a, _, _, _ = CT6_KEY.unpack(ct_key(17, "fd00::3", "fd00::2", 1, 2))
    assert a[-1] == 2
    entry = decode_ct(k, struct.pack("<QQIIII", 1, 2, 3, 7, 9, 0))
    assert (entry.addr_a, entry.addr_b, entry.legs) == ("fd00::1", "fd00::2", 3)
    assert (entry.ifindex_a, entry.ifindex_b) == (7, 9)
    with pytest.raises(ValueError, match="different IP versions"):
        ct_key(6, "10.0.0.1", "fd00::1", 1, 2)


def test_ipset_keys() -> None:
    sid = 0x0102030405060708
    prefix, id_be, addr, port, proto, pad = IPSET_KEY.unpack(ipset_key(sid, "10.1.0.0/16"))
    assert (prefix, id_be, addr, port, proto, pad) == (
        80,
        bytes(range(1, 9)),
        b"\n\x01\0\0",
        0,
        0,
        0,
    )
    assert IPSET_KEY.unpack(ipset_key(sid, "10.1.2.3"))[0] == 96
    assert IPSET_KEY.unpack(ipset_key(sid, "10.1.2.3,tcp:8080"))[:5] == (
        120, bytes(range(1, 9)), b"\n\x01\x02\x03", 8080, 6
    )  # fmt: skip
    assert ipset_key(sid, "fd00::1/128") is None
    assert ipset6_key(sid, "10.1.2.3") is None
    plen, id_be, addr, port, proto, _ = IPSET6_KEY.unpack(ipset6_key(sid, "fd00:1::/32") or b"")
    assert (plen, id_be, addr, port, proto) == (96, bytes(range(1, 9)), bytes.fromhex(
        "fd000001" + "00" * 12), 0, 0)  # fmt: skip
    assert IPSET6_KEY.unpack(ipset6_key(sid, "fd00::1") or b"")[0] == 192
    full = IPSET6_KEY.unpack(ipset6_key(sid, "fd00::1,udp:53") or b"")
    assert (full[0], full[3], full[4]) == (216, 53, 17)
    assert ipset6_key(sid, "fd00::1,icmp:0") is None
    assert ipset_key(sid, "10.1.2.3,icmp:0") is None
    with pytest.raises(ValueError):
        ipset_key(sid, "not-an-ip")


def test_ipset_ids_are_upstreams_and_unique() -> None:
    ids = IDAllocator()
    want = struct.unpack("<Q", hashlib.sha256(b"\0" * 8 + b"s:abc").digest()[:8])[0]
    assert ids.get_or_alloc("s:abc") == want
    assert ids.get_or_alloc("s:abc") == want  # stable
    other = IDAllocator()
    other._owners[want] = "taken"  # a collision moves on to n = 1
    n1 = struct.unpack("<Q", hashlib.sha256((1).to_bytes(8, "little") + b"s:abc").digest()[:8])[0]
    assert other.get_or_alloc("s:abc") == n1
    ids.release("s:abc")
    assert ids.get("s:abc") is None


def test_kernel_gate() -> None:
    bpffs.check_kernel("6.18.44-fc")
    bpffs.check_kernel("5.3.0")
    with pytest.raises(bpffs.BPFUnavailable, match=r"kernel 5\.2 is older than 5\.3"):
        bpffs.check_kernel("5.2.21-generic")
    with pytest.raises(bpffs.BPFUnavailable, match="cannot parse"):
        bpffs.check_kernel("weird")


def test_enable_falls_back_to_nftables_when_bpffs_is_unusable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # /proc is a mount point that is not a bpffs: upstream would use another path; we refuse.
    monkeypatch.setattr(mode, "BPFFS_ROOT", "/proc")
    parts = object()
    with caplog.at_level(logging.ERROR):
        assert mode.enable({"BPFEnabled": True}, parts) is parts
    assert "/proc is mounted but is not a bpffs" in caplog.text
    assert "falling back to the nftables dataplane" in caplog.text


@pytest.mark.parametrize(
    ("ipv6", "define", "rpf", "rpf_define"),
    [(True, 1, "Loose", 2), (False, 0, "Strict", 1), (True, 1, "Disabled", 0)],
)
def test_ipv6_support_and_rpf_reach_the_programs_as_defines(
    monkeypatch: pytest.MonkeyPatch, ipv6: bool, define: int, rpf: str, rpf_define: int
) -> None:
    seen: dict[str, object] = {}
    monkeypatch.setattr(mode.bpffs, "check_kernel", lambda: None)
    monkeypatch.setattr(mode.bpffs, "is_bpffs", lambda path: True)
    monkeypatch.setattr(mode, "BPFDataplane", lambda *a, **kw: seen.update(kw) or "dp")
    config = {
        "BPFPolicyDebugEnabled": False,
        "BPFLogLevel": "Off",
        "Ipv6Support": ipv6,
        "BPFMapSizeConntrack": 10,
        "BPFMapSizeIPSets": 10,
        "BPFMapSizeIfState": 10,
        "BPFMapSizeRoute": 12,
        "BPFAttachType": "TC",
        "BPFEnforceRPF": rpf,
    }
    assert mode.open_dataplane(config) == "dp"
    assert seen["defines"] == {"CALI_LOG_LEVEL": 0, "CALI_IPV6": define, "CALI_RPF": rpf_define}
    assert seen["attach_type"] == "tc" and seen["link_dir"] == mode.LINK_DIR
    assert seen["sizes"] == mode.MapSizes(10, 10, 10, routes=12)


def test_route_keys_and_values() -> None:
    from calico.felix.bpf.maps import (
        ROUTE6_KEY,
        ROUTE_KEY,
        ROUTE_VALUE,
        decode_route,
        route_key,
        workload_route,
    )

    k = route_key("10.1.2.3/32")
    assert len(k) == ROUTE_KEY.size == 8 and ROUTE_KEY.unpack(k) == (32, bytes([10, 1, 2, 3]))
    assert route_key("10.1.2.3") == k  # a bare address is its host route
    assert route_key("10.1.2.3/24") == ROUTE_KEY.pack(24, bytes([10, 1, 2, 0]))  # host bits go
    k6 = route_key("fd00::1/128")
    assert len(k6) == ROUTE6_KEY.size == 20 and k6[:4] == (128).to_bytes(4, "little")
    assert decode_route(k6) == "fd00::1/128" and decode_route(k) == "10.1.2.3/32"
    assert ROUTE_VALUE.unpack(workload_route(7)) == (0x8 | 0x4, 7)  # LOCAL|WORKLOAD, ifindex
    with pytest.raises(ValueError):
        route_key("10.1.2.300/32")


@pytest.mark.parametrize(
    ("text", "literal"),
    [
        ("calico-packet: ", '"calico-packet: "'),
        ('a"b\\c', '"a\\"b\\\\c"'),  # quote and backslash escaped
        ("50%: ", '"50%%: "'),  # a literal printf format too
        ("tab\there é\n", '"tabhere "'),  # only printable ASCII survives
        ("", '""'),
    ],
)
def test_log_prefix_c_literal(text: str, literal: str) -> None:
    from calico.felix.bpf.polprog import _c_literal

    assert _c_literal(text) == literal


def test_log_rule_prefix_per_owner_and_template() -> None:
    """A log rule's record prefix is the nftables log statement's: LogPrefix with %t/%k/%n/%p
    of its policy (or ``pro`` and the name for a profile), and the rule's ID; no other action
    emits one."""
    from calico.felix.bpf.polprog import rule_id

    pid = PolicyID("web", kind="NetworkPolicy", namespace="ns1", tier="tier1")
    log = Rule(action="log", rule_id="h0")
    gen = Generator(
        {pid: Policy(inbound_rules=(log, Rule(action="allow")))},
        {"kns.ns1": Profile(inbound_rules=(log,))},
        lambda _: 1,
        log_template="pkt %t/%k/%n/%p",
    )
    tiers = (TierInfo("tier1", ingress_policies=(pid,)),)
    src = gen.source(EndpointPolicy(tiers, ("kns.ns1",), inbound=True))
    pol_id = rule_id("policy tier1/ns1/web", "inbound", 0, "h0")
    pro_id = rule_id("profile kns.ns1", "inbound", 0, "h0")
    pol = f'CALI_LOG_RULE_V4("pkt tier1/{short_kind(pid)}/web/ns1: ", 0x{pol_id:016x}ULL);'
    assert pol in src and pol.replace("_V4", "_V6") in src
    assert f'CALI_LOG_RULE_V4("pkt /pro/kns.ns1/: ", 0x{pro_id:016x}ULL);' in src
    assert src.count("CALI_LOG_RULE_V4") == 2
    default = Generator({}, {"p": Profile(inbound_rules=(log,))}, lambda _: 1)
    assert '("calico-packet: ",' in default.source(EndpointPolicy((), ("p",), inbound=True))
