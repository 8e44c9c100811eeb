"""A first apply (an empty namespace, every set, map and chain created in one transaction) over
netlink against the kernel, with libnftables as the reference.

Two fresh tables get the same desired state: ``fa`` through an :class:`NftablesTable` with a
netlink sender, ``fb`` through libnftables only. Their ``nft -j list`` outputs must be equal (up
to the table name and handles), ``fa``'s apply must have been one netlink batch, and a new
instance (a restarted Felix) with the same desired state must send nothing
(design/felix-nftables.md "Transactions over netlink").
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from unittest import mock

import nftables
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from netns_helpers import Netns, fresh_netns
from test_nftables_nlrules_kernel import NAMED, POLICY_RULES, SEL, listing

from calico.felix.messages import PolicyID, Profile, TierInfo, WorkloadEndpoint
from calico.felix.nftables import transaction
from calico.felix.nftables.model import Chain, NftRule, NftSet, VerdictMap, ipset_name
from calico.felix.nftables.netlink import NetlinkElements
from calico.felix.nftables.nlreadback import read_table
from calico.felix.nftables.readback import parse_listing
from calico.felix.nftables.state import KernelState
from calico.felix.nftables.table import NftablesTable
from calico.felix.rules import RuleRenderer
from calico.felix.rules import exprs as x
from calico.felix.rules.config import RenderConfig

pytestmark = pytest.mark.root

PORTS4 = ("ipv4_addr", "inet_proto", "inet_service")
PORTS6 = ("ipv6_addr", "inet_proto", "inet_service")
Program = Callable[[NftablesTable], None]


@pytest.fixture(scope="module")
def ns() -> Iterator[Netns]:
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"):
        pytest.skip("needs root, iproute2 and nft")
    with fresh_netns("calfa") as netns:
        yield netns


def first_apply_both(ns: Netns, program: Program) -> None:
    """``program`` into two fresh tables (netlink, libnftables): equal listings, one netlink
    batch; then a restart (a new instance, same desired state) sends nothing."""

    def make(netlink: bool) -> NftablesTable:
        sender = NetlinkElements() if netlink else None
        return NftablesTable(
            "fa" if netlink else "fb", nft=nftables.Nftables(), netlink=sender, reader=sender
        )

    for name in ("fa", "fb"):
        ns.nft("delete", "table", "inet", name, check=False)
    a, b = ns.call(lambda: make(True)), ns.call(lambda: make(False))
    program(a)
    program(b)
    ra, rb = ns.call(a.apply), ns.call(b.apply)
    assert ra.ok and rb.ok, (ra.error, rb.error)
    assert ra.netlink and not rb.netlink, ra.fallback
    assert ra.commands == rb.commands and ra.stats == rb.stats
    assert listing(ns, "fa") == listing(ns, "fb")
    for name in ("fa", "fb"):  # built over netlink, and by libnftables
        assert_reads_alike(ns, name)
    restarted = ns.call(lambda: make(True))
    program(restarted)
    again = ns.call(restarted.apply)
    assert again.ok and again.resynced and again.commands == 0, again
    assert restarted.readback_fallback is None, restarted.readback_fallback
    for t in (a, restarted):
        assert isinstance(t._netlink, NetlinkElements)
        ns.call(t._netlink.close)


def assert_reads_alike(ns: Netns, name: str) -> None:
    """The table read back over netlink dumps equals libnftables' listing parsed."""

    def both() -> tuple[KernelState, KernelState]:
        rc, out, err = nftables.Nftables().json_cmd(
            {"nftables": [{"list": {"table": {"family": "inet", "name": name}}}]}
        )
        assert rc == 0, err
        conn = NetlinkElements()
        try:
            return read_table(conn, "inet", name), parse_listing(out, name)
        finally:
            conn.close()

    over_netlink, through_libnftables = ns.call(both)
    assert over_netlink == through_libnftables


def named(proto: str, addr: str, port: str) -> dict[str, object]:
    return {"concat": [x.payload(proto, addr), x.meta("l4proto"), x.payload("th", port)]}


@st.composite
def v4_members(draw: st.DrawFn, interval: bool) -> set[str]:
    """Non-overlapping members (an interval set refuses overlaps): one per distinct /16."""
    out = set()
    for second in draw(st.lists(st.integers(0, 255), unique=True, max_size=8)):
        base = f"{draw(st.sampled_from([10, 172, 255]))}.{second}"
        kind = draw(st.sampled_from(["host", "net", "range"] if interval else ["host"]))
        if kind == "host":
            out.add(f"{base}.{draw(st.integers(0, 255))}.{draw(st.integers(0, 255))}")
        elif kind == "net":
            plen = draw(st.integers(16, 31))
            out.add(f"{base}.0.0/{plen}")
        else:
            lo = draw(st.integers(0, 254))
            out.add(f"{base}.0.{lo}-{base}.0.{draw(st.integers(lo + 1, 255))}")
    return out


@st.composite
def v6_members(draw: st.DrawFn, interval: bool) -> set[str]:
    out = set()
    for group in draw(st.lists(st.integers(1, 0xFFFF), unique=True, max_size=6)):
        if interval and draw(st.booleans()):
            out.add(f"{group:x}::/{draw(st.sampled_from([16, 32, 64, 127]))}")
        else:
            out.add(f"{group:x}::{draw(st.integers(1, 0xFFFF)):x}")
    return out


@st.composite
def port_members(draw: st.DrawFn, v6: bool) -> set[tuple[str, int, int]]:
    addrs = draw(v6_members(False) if v6 else v4_members(False))
    return {(a, draw(st.sampled_from([6, 17, 132])), draw(st.integers(0, 0xFFFF))) for a in addrs}


@st.composite
def desired_sets(draw: st.DrawFn) -> list[NftSet]:
    return [
        NftSet("n4", "ipv4_addr", True, draw(v4_members(True))),
        NftSet("h4", "ipv4_addr", False, draw(v4_members(False))),
        NftSet("n6", "ipv6_addr", True, draw(v6_members(True))),
        NftSet("h6", "ipv6_addr", False, draw(v6_members(False))),
        NftSet("p4", PORTS4, False, draw(port_members(False))),
        NftSet("p6", PORTS6, False, draw(port_members(True))),
    ]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sets=desired_sets(), ifaces=st.lists(st.sampled_from(["cali0", "cali1", "eth0"]), unique=True)
)
def test_first_apply_of_sets_maps_and_chains_lists_like_libnftables(
    ns: Netns, sets: list[NftSet], ifaces: list[str]
) -> None:
    def program(t: NftablesTable) -> None:
        for s in sets:
            t.set_set(s)
        t.set_map(VerdictMap("disp", elements={i: ("goto", "tgt") for i in ifaces}))
        t.set_map(VerdictMap("empty"))
        t.set_chain(Chain("tgt", [NftRule([x.RETURN], "back")]))
        t.set_chain(
            Chain(
                "use",
                [
                    NftRule([x.nfproto(4), x.match(x.payload("ip", "saddr"), "@n4"), x.ACCEPT]),
                    NftRule([x.nfproto(6), x.match(x.payload("ip6", "daddr"), "@h6"), x.DROP]),
                    NftRule([x.vmap(x.meta("iifname"), "disp")]),
                    # A named-port lookup with no nfproto match of its own (a multi-port
                    # rule's): libnftables adds ``meta nfproto`` in front.
                    NftRule([x.match(named("ip", "daddr", "dport"), "@p4"), x.ACCEPT]),
                    NftRule([x.match(named("ip6", "daddr", "dport"), "@p6"), x.ACCEPT]),
                    NftRule(
                        [
                            x.match(x.payload("th", "dport"), 80),
                            x.match(named("ip", "saddr", "sport"), "@p4", "!="),
                            x.DROP,
                        ]
                    ),
                ],
            )
        )

    first_apply_both(ns, program)


@pytest.mark.parametrize("config", [RenderConfig(), RenderConfig(deny_action="reject")])
def test_renderers_whole_first_apply_lists_like_libnftables(
    ns: Netns, config: RenderConfig
) -> None:
    """Felix's shape: static chains, sets (some with members), dispatch maps, policy, profile
    and endpoint chains, all in the first transaction."""
    r = RuleRenderer(config)
    pid = PolicyID("p1", "GlobalNetworkPolicy", tier="t1")
    tiers = (TierInfo("t1", (pid,), (pid,), "Deny"),)
    weps = {
        f"cali{i}": WorkloadEndpoint("active", f"w{i}", profile_ids=("kns.a",), tiers=tiers)
        for i in range(3)
    }
    from calico.felix.messages import Policy

    chains = [
        *r.static_chains(),
        *r.policy_chains(pid, Policy(inbound_rules=POLICY_RULES, outbound_rules=POLICY_RULES)),
        *r.profile_chains("kns.a", Profile(inbound_rules=POLICY_RULES[:2])),
    ]
    for iface, ep in weps.items():
        chains += r.workload_endpoint_chains(iface, ep)
    sets = [*r.static_sets()]
    for v in config.ip_versions:
        addr = f"ipv{v}_addr"
        host = "10.65.0." if v == 4 else "fd00::"
        sets.append(NftSet(ipset_name(SEL, v), addr, True, {f"{host}{i}" for i in range(1, 50)}))
        ports = {(f"{host}{i}", 6, 8080) for i in range(1, 20)}
        sets.append(
            NftSet(ipset_name(NAMED, v), (addr, "inet_proto", "inet_service"), False, ports)
        )

    def program(t: NftablesTable) -> None:
        for s in sets:
            t.set_set(s)
        for m in r.dispatch_maps(weps, {}):
            t.set_map(m)
        for c in chains:
            t.set_chain(c)

    first_apply_both(ns, program)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sets=desired_sets())
def test_sets_created_in_their_own_order_list_like_libnftables(
    ns: Netns, sets: list[NftSet]
) -> None:
    """Above ``SORTED_CREATE_LIMIT`` a new set's members go in the set's own order (limit 1
    here, so nearly every set does): the kernel holds what libnftables builds from the
    sorted JSON, and a restart sends nothing."""

    def program(t: NftablesTable) -> None:
        for s in sets:
            t.set_set(s)

    with mock.patch.object(transaction, "SORTED_CREATE_LIMIT", 1):
        first_apply_both(ns, program)


def test_a_big_first_apply_lists_like_libnftables(ns: Netns) -> None:
    """Sets over ``SORTED_CREATE_LIMIT`` (the real limit) in one first apply, as at scale:
    12,000 ``address . proto . port`` members, 12,000 interval hosts and a few nets."""
    hosts = [f"10.{i >> 8 & 255}.{i & 255}.{(i * 7) % 250 + 1}" for i in range(12_000)]
    ports = {(h, (6, 17)[i % 2], 8080 + i % 3) for i, h in enumerate(hosts)}
    nets = {f"10.{i >> 8 & 255}.{i & 255}.{(i * 7) % 250 + 1}" for i in range(12_000)}
    nets |= {"172.16.0.0/16", "192.168.0.0/24", "192.168.1.0-192.168.1.9"}

    def program(t: NftablesTable) -> None:
        t.set_set(NftSet("big-ports", PORTS4, False, ports))
        t.set_set(NftSet("big-nets", "ipv4_addr", True, nets))
        t.set_set(NftSet("small", "ipv4_addr", False, {"10.0.0.1", "10.0.0.2"}))

    assert len(ports) > transaction.SORTED_CREATE_LIMIT < len(nets)
    first_apply_both(ns, program)
