"""Golden static chains, dispatch chains/maps, sets, and the render config from Felix config."""

from __future__ import annotations

import pytest

from calico.felix.config import Config, Source, resolve
from calico.felix.config.netparsers import ProtoPort
from calico.felix.messages import HostEndpoint, PolicyID, TierInfo
from calico.felix.nftables.model import Chain
from calico.felix.rules import RenderConfig, RuleRenderer

MARK = {"meta": {"key": "mark"}}


def body(chain: Chain) -> list[list[dict]]:
    return [list(r.exprs) for r in chain.rules]


def by_name(chains: list[Chain]) -> dict[str, Chain]:
    out = {c.name: c for c in chains}
    assert len(out) == len(chains), "duplicate chain names"
    return out


def m(left, right, op="=="):
    return {"match": {"op": op, "left": left, "right": right}}


def test_config_marks() -> None:
    c = RenderConfig()
    assert (c.mark_accept, c.mark_pass, c.mark_drop, c.mark_scratch0, c.mark_scratch1) == (
        0x10000,
        0x20000,
        0x40000,
        0x80000,
        0x100000,
    )
    assert c.mark_all == 0x1F0000
    assert RenderConfig(mark_mask=0xF0F0).mark_scratch1 == 0x1000
    assert RenderConfig(mark_mask=0xF0F0).mark_all == 0x10F0
    with pytest.raises(ValueError):
        RenderConfig(mark_mask=0xF)


def felix_config(**params: str) -> Config:
    config = resolve({Source.CONFIG_FILE: params}, hostname="node-1")
    assert not config.errors and not config.invalid
    return config


def test_defaults_are_the_felix_parameter_defaults() -> None:
    assert RenderConfig.from_config(felix_config()) == RenderConfig()
    assert RenderConfig() == RenderConfig(
        mark_mask=0xFFFF0000,
        deny_action="drop",
        endpoint_to_host_action="drop",
        failsafe_inbound=tuple(
            ProtoPort(proto, port)
            for proto, port in (("tcp", 22), ("udp", 68), ("tcp", 179), ("tcp", 2379),
                                ("tcp", 2380), ("tcp", 5473), ("tcp", 6443), ("tcp", 6666),
                                ("tcp", 6667))
        ),
        failsafe_outbound=tuple(
            ProtoPort(proto, port)
            for proto, port in (("udp", 53), ("udp", 67), ("tcp", 179), ("tcp", 2379),
                                ("tcp", 2380), ("tcp", 5473), ("tcp", 6443), ("tcp", 6666),
                                ("tcp", 6667))
        ),
        log_prefix="calico-packet",
        log_rate_limit="",
        log_rate_burst=5,
        ipv6_enabled=True,
        nat_outgoing_address="",
        workload_iface_prefixes=("cali",),
        disable_conntrack_invalid_check=False,
    )  # fmt: skip


def test_from_typed_felix_config() -> None:
    config = felix_config(
        NftablesMarkMask="0xff000000",
        NftablesFilterDenyAction="REJECT",
        DefaultEndpointToHostAction="ACCEPT",
        FailsafeInboundHostPorts="tcp:22, udp:10.0.0.0/8:68,tcp:[fd00::/64]:179",
        FailsafeOutboundHostPorts="none",
        InterfacePrefix="cali,tap",
        Ipv6Support="false",
        LogPrefix="x",
        LogActionRateLimit="10/second",
        LogActionRateLimitBurst="7",
        NATOutgoingAddress="192.0.2.1",
        DisableConntrackInvalidCheck="true",
    )
    cfg = RenderConfig.from_config(config)
    assert cfg == RenderConfig(
        mark_mask=0xFF000000,
        deny_action="reject",
        endpoint_to_host_action="accept",
        failsafe_inbound=(
            ProtoPort("tcp", 22),
            ProtoPort("udp", 68, "10.0.0.0/8"),
            ProtoPort("tcp", 179, "fd00::/64"),
        ),
        failsafe_outbound=(),
        log_prefix="x",
        log_rate_limit="10/second",
        log_rate_burst=7,
        ipv6_enabled=False,
        nat_outgoing_address="192.0.2.1",
        workload_iface_prefixes=("cali", "tap"),
        disable_conntrack_invalid_check=True,
    )
    assert cfg.mark_accept == 0x1000000 and cfg.ip_versions == (4,)


def test_the_dataplane_reads_the_nftables_params_not_their_iptables_twins() -> None:
    config = felix_config(IptablesFilterDenyAction="REJECT", IptablesMarkMask="0xff000000")
    assert RenderConfig.from_config(config) == RenderConfig()


def test_an_empty_log_prefix_renders_the_default_prefix() -> None:
    config = felix_config(LogPrefix="none")
    assert config.log_prefix == ""
    assert RenderConfig.from_config(config).log_prefix == "calico-packet"


def test_base_chains_hook_at_upstream_priorities() -> None:
    chains = by_name(RuleRenderer().static_chains())
    hooks = {n: (c.base.type, c.base.hook, c.base.priority) for n, c in chains.items() if c.base}
    assert hooks == {
        "filter-INPUT": ("filter", "input", 0),
        "filter-FORWARD": ("filter", "forward", 0),
        "filter-OUTPUT": ("filter", "output", 0),
        "nat-PREROUTING": ("nat", "prerouting", -100),
        "nat-POSTROUTING": ("nat", "postrouting", 100),
        "mangle-PREROUTING": ("filter", "prerouting", -150),
        "raw-PREROUTING": ("filter", "prerouting", -300),
        "raw-OUTPUT": ("filter", "output", -300),
    }
    assert body(chains["filter-FORWARD"]) == [[{"jump": {"target": "filter-cali-FORWARD"}}]]
    # Every jump/goto target and vmap is defined by the renderer.
    maps = {vm.name for vm in RuleRenderer().dispatch_maps([])}
    for c in chains.values():
        for rule in c.rules:
            for e in rule.exprs:
                for kind in ("jump", "goto"):
                    if kind in e:
                        assert e[kind]["target"] in chains
                if "vmap" in e:
                    assert e["vmap"]["data"][1:] in maps


def test_forward_and_wl_to_host() -> None:
    chains = by_name(RuleRenderer(RenderConfig(endpoint_to_host_action="accept")).static_chains())
    iif = {"meta": {"key": "iifname"}}
    oif = {"meta": {"key": "oifname"}}
    assert body(chains["filter-cali-FORWARD"]) == [
        [{"mangle": {"key": MARK, "value": {"&": [MARK, ~0x1E0000 & 0xFFFFFFFF]}}}],
        [m({"&": [MARK, 0x10000]}, 0), {"jump": {"target": "filter-cali-from-hep-forward"}}],
        [m(iif, "cali*"), {"jump": {"target": "filter-cali-from-wl-dispatch"}}],
        [m(oif, "cali*"), {"jump": {"target": "filter-cali-to-wl-dispatch"}}],
        [{"jump": {"target": "filter-cali-to-hep-forward"}}],
        [m({"&": [MARK, 0x10000]}, 0x10000), {"accept": None}],
    ]
    assert body(chains["filter-cali-wl-to-host"])[1:] == [
        [{"jump": {"target": "filter-cali-from-wl-dispatch"}}],
        [{"accept": None}],
    ]
    assert body(chains["filter-cali-INPUT"])[0] == [
        m(iif, "cali*"),
        {"goto": {"target": "filter-cali-wl-to-host"}},
    ]
    assert body(chains["filter-cali-OUTPUT"])[1] == [m(oif, "cali*"), {"return": None}]


def test_failsafe_chains() -> None:
    cfg = RenderConfig(
        failsafe_inbound=(ProtoPort("tcp", 22), ProtoPort("udp", 68, "10.0.0.0/8")),
        failsafe_outbound=(ProtoPort("udp", 53),),
    )
    chains = by_name(RuleRenderer(cfg).static_chains())
    th = lambda f: {"payload": {"protocol": "th", "field": f}}  # noqa: E731
    l4 = lambda p: m({"meta": {"key": "l4proto"}}, p)  # noqa: E731
    assert body(chains["filter-cali-failsafe-in"]) == [
        [l4(6), m(th("dport"), 22), {"accept": None}],
        [
            m({"meta": {"key": "nfproto"}}, "ipv4"),
            m(
                {"payload": {"protocol": "ip", "field": "saddr"}},
                {"prefix": {"addr": "10.0.0.0", "len": 8}},
            ),
            l4(17),
            m(th("dport"), 68),
            {"accept": None},
        ],
    ]
    assert body(chains["filter-cali-failsafe-out"]) == [
        [l4(17), m(th("dport"), 53), {"accept": None}]
    ]
    # raw: also the replies of the other direction's failsafe connections.
    raw_in = body(chains["raw-cali-failsafe-in"])
    assert raw_in[-1] == [l4(17), m(th("sport"), 53), {"accept": None}]
    raw_out = body(chains["raw-cali-failsafe-out"])
    assert raw_out[1] == [l4(6), m(th("sport"), 22), {"accept": None}]


def test_nat_outgoing_and_sets() -> None:
    r = RuleRenderer()
    chains = by_name(r.static_chains())
    p = lambda proto, f: {"payload": {"protocol": proto, "field": f}}  # noqa: E731
    assert body(chains["nat-cali-nat-outgoing"]) == [
        [
            m({"meta": {"key": "nfproto"}}, "ipv4"),
            m(p("ip", "saddr"), "@cali40masq-ipam-pools"),
            m(p("ip", "daddr"), "@cali40all-ipam-pools", "!="),
            {"masquerade": None},
        ],
        [
            m({"meta": {"key": "nfproto"}}, "ipv6"),
            m(p("ip6", "saddr"), "@cali60masq-ipam-pools"),
            m(p("ip6", "daddr"), "@cali60all-ipam-pools", "!="),
            {"masquerade": None},
        ],
    ]
    assert sorted((s.name, s.type, s.interval) for s in r.static_sets()) == [
        ("cali40all-ipam-pools", "ipv4_addr", True),
        ("cali40masq-ipam-pools", "ipv4_addr", True),
        ("cali60all-ipam-pools", "ipv6_addr", True),
        ("cali60masq-ipam-pools", "ipv6_addr", True),
    ]
    snat = RuleRenderer(RenderConfig(nat_outgoing_address="192.0.2.1", ipv6_enabled=False))
    nat = by_name(snat.static_chains())["nat-cali-nat-outgoing"]
    assert body(nat)[0][-1] == {"snat": {"family": "ip", "addr": "192.0.2.1"}}
    assert len(nat.rules) == 1


def test_nat_outgoing_exclusions_ip_pools_and_host_ips() -> None:
    """With IPPoolsAndHostIPs, traffic to any node's address keeps its source too."""
    p = lambda proto, f: {"payload": {"protocol": proto, "field": f}}  # noqa: E731
    cfg = RenderConfig(nat_outgoing_exclusions="IPPoolsAndHostIPs", ipv6_enabled=False)
    nat = by_name(RuleRenderer(cfg).static_chains())["nat-cali-nat-outgoing"]
    assert body(nat) == [
        [
            m({"meta": {"key": "nfproto"}}, "ipv4"),
            m(p("ip", "saddr"), "@cali40masq-ipam-pools"),
            m(p("ip", "daddr"), "@cali40all-ipam-pools", "!="),
            m(p("ip", "daddr"), "@cali40all-hosts-net", "!="),
            {"masquerade": None},
        ]
    ]
    assert RenderConfig().nat_outgoing_exclusions == "IPPoolsOnly"


def test_vxlan_port_is_open_only_to_allowed_hosts() -> None:
    p = lambda proto, f: {"payload": {"protocol": proto, "field": f}}  # noqa: E731
    fib = lambda side: m({"fib": {"result": "type", "flags": [side]}}, "local")  # noqa: E731
    udp = [m({"meta": {"key": "nfproto"}}, "ipv4"), m({"meta": {"key": "l4proto"}}, 17)]
    udp.append(m(p("th", "dport"), 4790))
    cfg = RenderConfig(vxlan_versions=(4,), vxlan_port=4790, deny_action="reject")
    chains = by_name(RuleRenderer(cfg).static_chains())
    assert body(chains["filter-cali-INPUT"])[:2] == [
        [*udp, m(p("ip", "saddr"), "@cali40all-vxlan-net"), fib("daddr"), {"accept": None}],
        [*udp, fib("daddr"), {"drop": None}],  # IPv4 always drops, as upstream
    ]
    assert body(chains["filter-cali-OUTPUT"])[0] == [
        *udp,
        fib("saddr"),
        m(p("ip", "daddr"), "@cali40all-vxlan-net"),
        {"accept": None},
    ]
    v6 = by_name(
        RuleRenderer(RenderConfig(vxlan_versions=(6,), deny_action="reject")).static_chains()
    )
    assert body(v6["filter-cali-INPUT"])[1][-1] == {"reject": None}
    plain = by_name(RuleRenderer().static_chains())
    assert "all-vxlan-net" not in str(body(plain["filter-cali-INPUT"]))


def test_ipv6_disabled_guards_top_level_chains() -> None:
    chains = by_name(RuleRenderer(RenderConfig(ipv6_enabled=False)).static_chains())
    guard = [m({"meta": {"key": "nfproto"}}, "ipv4", "!="), {"return": None}]
    for name in (
        "filter-cali-INPUT",
        "filter-cali-FORWARD",
        "filter-cali-OUTPUT",
        "raw-cali-PREROUTING",
    ):
        assert body(chains[name])[0] == guard


def test_dispatch_chains_and_maps() -> None:
    r = RuleRenderer()
    chains = by_name(r.static_chains())
    assert body(chains["filter-cali-from-wl-dispatch"]) == [
        [{"vmap": {"key": {"meta": {"key": "iifname"}}, "data": "@filter-cali-from-wl-dispatch"}}],
        [{"drop": None}],
    ]
    assert body(chains["filter-cali-to-host-endpoint"]) == [
        [{"vmap": {"key": {"meta": {"key": "oifname"}}, "data": "@filter-cali-to-host-endpoint"}}],
    ]
    unt = PolicyID("u")
    heps = {
        "eth0": HostEndpoint("eth0", untracked_tiers=(TierInfo("default", (unt,)),)),
        "eth1": HostEndpoint("eth1"),
        "*": HostEndpoint("*"),
    }
    maps = {vm.name: vm.elements for vm in r.dispatch_maps({"cali1": None, "cali2": None}, heps)}
    assert maps["filter-cali-from-wl-dispatch"] == {
        "cali1": ("goto", "filter-cali-fw-cali1"),
        "cali2": ("goto", "filter-cali-fw-cali2"),
    }
    assert maps["filter-cali-to-wl-dispatch"]["cali2"] == ("goto", "filter-cali-tw-cali2")
    assert maps["filter-cali-from-host-endpoint"] == {
        "eth0": ("goto", "filter-cali-fh-eth0"),
        "eth1": ("goto", "filter-cali-fh-eth1"),
    }
    assert maps["filter-cali-to-hep-forward"]["eth1"] == ("goto", "filter-cali-thfw-eth1")
    assert maps["raw-cali-to-host-endpoint"] == {"eth0": ("goto", "raw-cali-th-eth0")}
    assert maps["mangle-cali-from-host-endpoint"] == {}
    assert len(maps) == 9
