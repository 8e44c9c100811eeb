"""The fixed skeleton: hooked base chains, the top-level ``cali-*`` chains they jump to, failsafe
chains, workload-to-host handling and NAT-outgoing (design/felix-rules.md, "Chain layout";
upstream's rules/static.go, trimmed to this dataplane).

Each base chain holds a single jump to its ``cali-`` chain so the logic stays in regular chains
that the table layer can rewrite atomically without re-hooking.
"""

from __future__ import annotations

from calico.felix.config.netparsers import ProtoPort
from calico.felix.nftables.model import BaseChain, Chain, Expr, NftRule, NftSet, ipset_name, layered
from calico.felix.rules.config import RenderConfig
from calico.felix.rules.endpoint_dispatch import (
    FROM_HEP,
    FROM_HEP_FWD,
    FROM_WL,
    MANGLE_FROM_HEP,
    RAW_FROM_HEP,
    RAW_TO_HEP,
    TO_HEP,
    TO_HEP_FWD,
    TO_WL,
    dispatch_chains,
)
from calico.felix.rules.endpoints import FAILSAFE_IN, FAILSAFE_OUT
from calico.felix.rules.exprs import (
    ACCEPT,
    ADDR_PROTO,
    DROP,
    REJECT,
    RETURN,
    ct_state,
    goto,
    iifname,
    jump,
    mark_clear,
    mark_is_clear,
    mark_is_set,
    mark_set,
    match,
    meta,
    nfproto,
    oifname,
    payload,
)

# Special IP set IDs (upstream rule_defs): NAT-outgoing pools and all pools.
IPSET_MASQ_POOLS = "masq-ipam-pools"
IPSET_ALL_POOLS = "all-ipam-pools"
IPSET_ALL_HOSTS = "all-hosts-net"  # every node's IPs (filled by the hosts IP set manager)
IPSET_ALL_VXLAN = "all-vxlan-net"  # remote VTEPs' node IPs + ExternalNodesCIDRList (VXLAN mgr)

WL_TO_HOST = "cali-wl-to-host"
NAT_OUTGOING = "cali-nat-outgoing"

# (layer, hook, nft chain type, priority): upstream's nftables base chains.
BASE_CHAINS = (
    ("filter", "input", "filter", 0),
    ("filter", "forward", "filter", 0),
    ("filter", "output", "filter", 0),
    ("nat", "prerouting", "nat", -100),
    ("nat", "postrouting", "nat", 100),
    ("mangle", "prerouting", "filter", -150),
    ("raw", "prerouting", "filter", -300),
    ("raw", "output", "filter", -300),
)

ICMPV6_HOST_TYPES = (130, 131, 132, 133, 135, 136)  # MLD + router solicit + neighbour discovery


def _wl_iface_patterns(config: RenderConfig) -> list[str]:
    return [f"{p}*" for p in config.workload_iface_prefixes]


def _family_guard(config: RenderConfig) -> list[NftRule]:
    """With IPv6 off, leave IPv6 traffic alone, as upstream (which has no ip6 tables then)."""
    if config.ipv6_enabled:
        return []
    return [NftRule([match(meta("nfproto"), "ipv4", "!="), RETURN], "IPv6 disabled")]


def base_chains() -> list[Chain]:
    out = []
    for layer, hook, ctype, prio in BASE_CHAINS:
        name = layered(layer, hook.upper())
        target = layered(layer, f"cali-{hook.upper()}")
        out.append(Chain(name, [NftRule([jump(target)])], BaseChain(name, ctype, hook, prio)))
    return out


def _fib_local(side: str) -> Expr:
    return match({"fib": {"result": "type", "flags": [side]}}, "local")


def vxlan_rules(config: RenderConfig, hook: str) -> list[NftRule]:
    """VXLAN to/from this host only with the hosts in ``all-vxlan-net`` (upstream static.go):
    INPUT accepts VXLAN from them and drops the rest; OUTPUT accepts VXLAN to them (before
    host endpoint policy could block the overlay)."""
    out = []
    for version in config.vxlan_versions:
        p = ADDR_PROTO[version]
        allowed = f"@{ipset_name(IPSET_ALL_VXLAN, version)}"
        udp = [nfproto(version), match(meta("l4proto"), 17)]
        udp.append(match(payload("th", "dport"), config.vxlan_port))
        if hook == "input":
            deny = DROP if version == 4 or config.deny_action == "drop" else REJECT
            out += [
                NftRule(
                    [*udp, match(payload(p, "saddr"), allowed), _fib_local("daddr"), ACCEPT],
                    "Allow VXLAN packets from allowed hosts",
                ),
                NftRule([*udp, _fib_local("daddr"), deny], "Drop VXLAN packets from other hosts"),
            ]
        else:
            out.append(
                NftRule(
                    [*udp, _fib_local("saddr"), match(payload(p, "daddr"), allowed), ACCEPT],
                    "Allow VXLAN packets to allowed hosts",
                )
            )
    return out


def filter_chains(config: RenderConfig) -> list[Chain]:
    accept = config.mark_accept
    guard = _family_guard(config)
    wl = _wl_iface_patterns(config)
    f = lambda name: layered("filter", name)  # noqa: E731

    inp = [
        *guard,
        *vxlan_rules(config, "input"),
        *(NftRule([iifname(p), goto(f(WL_TO_HOST))], "From workload") for p in wl),
        NftRule([mark_is_set(accept), ACCEPT]),
        NftRule([mark_clear(config.mark_all)]),
        NftRule([jump(FROM_HEP.full_name)]),
        NftRule([mark_is_set(accept), ACCEPT], "Host endpoint policy accepted packet"),
    ]
    to_host_action = {"drop": DROP, "accept": ACCEPT, "return": RETURN}[
        config.endpoint_to_host_action
    ]
    wl_to_host = [
        NftRule(
            [
                match(meta("l4proto"), 58),
                match(payload("icmpv6", "type"), {"set": list(ICMPV6_HOST_TYPES)}),
                ACCEPT,
            ],
            "ICMPv6 neighbour discovery",
        ),
        NftRule([jump(FROM_WL.full_name)]),
        NftRule([to_host_action], "Configured DefaultEndpointToHostAction"),
    ]
    fwd = [
        *guard,
        NftRule([mark_clear(config.mark_all & ~accept)]),
        NftRule([mark_is_clear(accept), jump(FROM_HEP_FWD.full_name)]),
        *(NftRule([iifname(p), jump(FROM_WL.full_name)], "From workload") for p in wl),
        *(NftRule([oifname(p), jump(TO_WL.full_name)], "To workload") for p in wl),
        NftRule([jump(TO_HEP_FWD.full_name)]),
        NftRule([mark_is_set(accept), ACCEPT], "Policy explicitly accepted packet"),
    ]
    out = [
        *guard,
        *vxlan_rules(config, "output"),
        NftRule([mark_is_set(accept), ACCEPT]),
        *(NftRule([oifname(p), RETURN], "Host to workload: not policed") for p in wl),
        NftRule([mark_clear(config.mark_all)]),
        NftRule([jump(TO_HEP.full_name)]),
        NftRule([mark_is_set(accept), ACCEPT], "Host endpoint policy accepted packet"),
    ]
    return [
        Chain(f("cali-INPUT"), inp),
        Chain(f(WL_TO_HOST), wl_to_host),
        Chain(f("cali-FORWARD"), fwd),
        Chain(f("cali-OUTPUT"), out),
        Chain(f(FAILSAFE_IN), _failsafe_rules(config.failsafe_inbound, "dport", "saddr")),
        Chain(f(FAILSAFE_OUT), _failsafe_rules(config.failsafe_outbound, "dport", "daddr")),
    ]


def _failsafe_rules(entries: tuple[ProtoPort, ...], port_field: str, addr: str) -> list[NftRule]:
    """Accept ``entries``; ``port_field``/``addr`` say which side of the packet to look at."""
    out = []
    for fs in entries:
        exprs: list[Expr] = []
        if fs.net:
            version = 6 if ":" in fs.net else 4
            prefix, length = fs.net.split("/")
            exprs += [
                nfproto(version),
                match(
                    payload(ADDR_PROTO[version], addr),
                    {"prefix": {"addr": prefix, "len": int(length)}},
                ),
            ]
        exprs += [
            match(meta("l4proto"), 6 if fs.protocol == "tcp" else 17),
            match(payload("th", port_field), fs.port),
            ACCEPT,
        ]
        out.append(NftRule(exprs, f"Failsafe {fs.protocol}:{fs.port}"))
    return out


def mangle_chains(config: RenderConfig) -> list[Chain]:
    accept = config.mark_accept
    pre = [
        *_family_guard(config),
        NftRule([ct_state("established", "related"), ACCEPT]),
        NftRule([mark_is_set(accept), ACCEPT]),
        NftRule([jump(MANGLE_FROM_HEP.full_name)]),
        NftRule([mark_is_set(accept), ACCEPT], "Pre-DNAT policy accepted packet"),
    ]
    return [
        Chain(layered("mangle", "cali-PREROUTING"), pre),
        Chain(
            layered("mangle", FAILSAFE_IN),
            _failsafe_rules(config.failsafe_inbound, "dport", "saddr"),
        ),
    ]


def raw_chains(config: RenderConfig) -> list[Chain]:
    """Untracked policy runs here, so failsafe must also allow the *replies* of the other
    direction's failsafe connections (there is no conntrack to do it)."""
    accept, from_wl = config.mark_accept, config.mark_scratch0
    guard = _family_guard(config)
    pre = [
        *guard,
        NftRule([mark_clear(config.mark_all)]),
        *(
            NftRule([iifname(p), mark_set(from_wl)], "Mark packets from workloads")
            for p in _wl_iface_patterns(config)
        ),
        NftRule(
            [
                mark_is_set(from_wl),
                match({"fib": {"result": "oif", "flags": ["saddr", "iif"]}}, False),
                DROP,
            ],
            "Strict reverse-path check for workloads",
        ),
        NftRule([mark_is_clear(from_wl), jump(RAW_FROM_HEP.full_name)]),
        NftRule([mark_is_set(accept), ACCEPT], "Untracked policy accepted packet"),
    ]
    out = [
        *guard,
        NftRule([mark_clear(config.mark_all)]),
        NftRule([jump(RAW_TO_HEP.full_name)]),
        NftRule([mark_is_set(accept), ACCEPT], "Untracked policy accepted packet"),
    ]
    fs_in = _failsafe_rules(config.failsafe_inbound, "dport", "saddr") + _failsafe_rules(
        config.failsafe_outbound, "sport", "saddr"
    )
    fs_out = _failsafe_rules(config.failsafe_outbound, "dport", "daddr") + _failsafe_rules(
        config.failsafe_inbound, "sport", "daddr"
    )
    return [
        Chain(layered("raw", "cali-PREROUTING"), pre),
        Chain(layered("raw", "cali-OUTPUT"), out),
        Chain(layered("raw", FAILSAFE_IN), fs_in),
        Chain(layered("raw", FAILSAFE_OUT), fs_out),
    ]


def nat_chains(config: RenderConfig) -> list[Chain]:
    """NAT-outgoing: sources in a natOutgoing pool going anywhere outside all pools (so
    pod-to-pod traffic across nodes keeps its source), and with ``NATOutgoingExclusions =
    IPPoolsAndHostIPs`` also outside every node's IPs."""
    rules = []
    for version in config.ip_versions:
        p = ADDR_PROTO[version]
        action: Expr = {"masquerade": None}
        if config.nat_outgoing_address:
            addr_version = 6 if ":" in config.nat_outgoing_address else 4
            if addr_version != version:
                continue
            action = {"snat": {"family": p, "addr": config.nat_outgoing_address}}
        rules.append(
            NftRule(
                [
                    nfproto(version),
                    match(payload(p, "saddr"), f"@{ipset_name(IPSET_MASQ_POOLS, version)}"),
                    match(payload(p, "daddr"), f"@{ipset_name(IPSET_ALL_POOLS, version)}", "!="),
                    *(
                        [
                            match(
                                payload(p, "daddr"),
                                f"@{ipset_name(IPSET_ALL_HOSTS, version)}",
                                "!=",
                            )
                        ]
                        if config.nat_outgoing_exclusions == "IPPoolsAndHostIPs"
                        else []
                    ),
                    action,
                ],
                "NAT outgoing",
            )
        )
    return [
        Chain(layered("nat", "cali-PREROUTING"), []),
        Chain(layered("nat", "cali-POSTROUTING"), [NftRule([jump(layered("nat", NAT_OUTGOING))])]),
        Chain(layered("nat", NAT_OUTGOING), rules),
    ]


def static_chains(config: RenderConfig) -> list[Chain]:
    return [
        *base_chains(),
        *filter_chains(config),
        *mangle_chains(config),
        *raw_chains(config),
        *nat_chains(config),
        *dispatch_chains(config),
    ]


def static_sets(config: RenderConfig) -> list[NftSet]:
    """Sets the static chains reference; the masquerade manager fills them."""
    out = []
    for version in config.ip_versions:
        for set_id in (IPSET_MASQ_POOLS, IPSET_ALL_POOLS):
            out.append(NftSet(ipset_name(set_id, version), f"ipv{version}_addr", interval=True))
    return out
