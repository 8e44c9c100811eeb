"""The netlink readback (``nlreadback.read_table``) against the kernel, with libnftables'
``list table`` + ``parse_listing`` as the reference: random tables written by Felix (base and
regular chains, random rules, every set shape, maps), then changed behind Felix's back with the
nft CLI, must read back identically both ways; what the decoder does not read falls back to
libnftables with the reason kept (design/felix-nftables.md "Readback over netlink").
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import nftables
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from netns_helpers import Netns, fresh_netns
from test_nftables_first_apply_kernel import PORTS4, PORTS6, port_members, v4_members, v6_members
from test_nftables_nlrules_kernel import rule

from calico.felix.nftables.model import BaseChain, Chain, NftRule, NftSet, VerdictMap
from calico.felix.nftables.netlink import NetlinkElements
from calico.felix.nftables.nlreadback import read_table
from calico.felix.nftables.readback import parse_listing
from calico.felix.nftables.state import KernelState
from calico.felix.nftables.table import NftablesTable
from calico.felix.rules import exprs as x

pytestmark = pytest.mark.root

TABLE = "rbk"
HOOKS = [("filter", h) for h in ("prerouting", "input", "forward", "output", "postrouting")]


@pytest.fixture(scope="module")
def ns() -> Iterator[Netns]:
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"):
        pytest.skip("needs root, iproute2 and nft")
    with fresh_netns("calrbk") as netns:
        yield netns


def both_ways(ns: Netns) -> tuple[KernelState, KernelState]:
    def read() -> tuple[KernelState, KernelState]:
        rc, out, err = nftables.Nftables().json_cmd(
            {"nftables": [{"list": {"table": {"family": "inet", "name": TABLE}}}]}
        )
        reference = parse_listing(out, TABLE) if rc == 0 else KernelState()
        assert rc == 0 or "No such file" in err, err
        conn = NetlinkElements()
        try:
            return read_table(conn, "inet", TABLE), reference
        finally:
            conn.close()

    return ns.call(read)


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[Chain], list[NftSet], dict[str, str]]:
    chains = [Chain("tgt1", [NftRule([x.RETURN], "back")]), Chain("tgt2", [])]
    for i, (typ, hook) in enumerate(draw(st.lists(st.sampled_from(HOOKS), max_size=3))):
        base = BaseChain(
            f"base{i}",
            typ,
            hook,
            draw(st.integers(-300, 300)),
            draw(st.sampled_from(["accept", "drop"])),
        )
        comments = draw(st.lists(st.sampled_from(["", "in", "é" * 70]), max_size=4))
        chains.append(Chain(f"base{i}", [NftRule([x.ACCEPT], c) for c in comments], base))
    for i in range(draw(st.integers(0, 3))):
        chains.append(Chain(f"w{i}", draw(st.lists(rule(), max_size=6))))
    sets = [
        NftSet("s4", "ipv4_addr", True, draw(v4_members(True)) | {"192.0.2.0/24"}),
        NftSet("s6", "ipv6_addr", True, draw(v6_members(True))),
        NftSet("p4", PORTS4, False, draw(port_members(False)) | {("10.0.0.1", 6, 80)}),
        NftSet("p6", PORTS6, False, draw(port_members(True))),
        NftSet("h4", "ipv4_addr", False, draw(v4_members(False))),
        NftSet("n6", "ipv6_addr", False, draw(v6_members(False))),
    ]
    ifaces = draw(st.lists(st.sampled_from(["cali0", "cali1", "eth0", "x" * 15]), unique=True))
    return chains, sets, {i: draw(st.sampled_from(["tgt1", "tgt2"])) for i in ifaces}


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(table=tables(), through_libnftables=st.booleans())
def test_random_felix_tables_read_back_alike(
    ns: Netns, table: tuple[list[Chain], list[NftSet], dict[str, str]], through_libnftables: bool
) -> None:
    chains, sets, disp = table
    ns.nft("delete", "table", "inet", TABLE, check=False)
    assert both_ways(ns) == (KernelState(), KernelState())

    def program() -> NftablesTable:
        sender = None if through_libnftables else NetlinkElements()
        t = NftablesTable(TABLE, nft=nftables.Nftables(), netlink=sender, reader=sender)
        for s in sets:
            t.set_set(s)
        t.set_map(VerdictMap("disp", elements={i: ("goto", c) for i, c in disp.items()}))
        t.set_map(VerdictMap("empty"))
        for c in chains:
            t.set_chain(c)
        result = t.apply()
        assert result.ok, result.error
        if sender is not None:
            sender.close()
        return t

    ns.call(program)
    over_netlink, reference = both_ways(ns)
    assert over_netlink == reference
    assert over_netlink.table_exists and set(over_netlink.chains) == {c.name for c in chains}


def test_changes_behind_felixs_back_read_back_alike(ns: Netns) -> None:
    """The nft CLI's own writes: foreign rules and chains, elements in libnftables' spelling,
    a set whose members run to the top of the address space, adjacent prefixes."""
    ns.nft("delete", "table", "inet", TABLE, check=False)
    ns.nft("add", "table", "inet", TABLE)
    for cmd in (
        "add chain inet rbk c { type filter hook forward priority -5; policy drop; }",
        "add chain inet rbk d",
        'add rule inet rbk c tcp dport 22 accept comment "cali:abc; mine"',
        "add rule inet rbk c counter",
        'add rule inet rbk d ip saddr 1.2.3.4 drop comment "not ours"',
        "add set inet rbk a { type ipv4_addr; flags interval; }",
        "add element inet rbk a { 0.0.0.0/1, 128.0.0.0/2, 192.0.0.0-255.255.255.255 }",
        "add set inet rbk b { type ipv6_addr; flags interval; }",
        "add element inet rbk b { ::/1, 8000::-ffff::1, ffff:ffff::/32 }",
        "add set inet rbk c4 { type ipv4_addr . inet_proto . inet_service; }",
        "add element inet rbk c4 { 10.0.0.1 . tcp . 80, 10.0.0.2 . udp . domain }",
        "add map inet rbk m { type ifname : verdict; }",
        "add element inet rbk m { cali0 : goto d, eth0 : accept, lo : drop }",
    ):
        ns.nft(*cmd.split(" ", 1))  # nft joins its arguments
    over_netlink, reference = both_ways(ns)
    assert over_netlink == reference
    assert over_netlink.chains["c"].hashes == ("abc", "")


@pytest.mark.parametrize(
    "cmd",
    [
        "add set inet rbk t { type ipv4_addr; timeout 1h; }",
        "add set inet rbk k { type mark; }",
        "add set inet rbk q { type inet_service; flags interval; }",
        "add map inet rbk v { type ipv4_addr : ipv4_addr; }",
        "add chain inet rbk ing { type filter hook ingress device lo priority 0; }",
    ],
)
def test_what_the_decoder_does_not_read_goes_through_libnftables(ns: Netns, cmd: str) -> None:
    ns.nft("delete", "table", "inet", TABLE, check=False)
    ns.nft("add", "table", "inet", TABLE)
    ns.nft(*cmd.split(" ", 1))

    def restart() -> NftablesTable:
        sender = NetlinkElements()
        t = NftablesTable(TABLE, nft=nftables.Nftables(), netlink=sender, reader=sender)
        assert t.apply().ok
        sender.close()
        return t

    t = ns.call(restart)
    assert t.readback_fallback, "the decoder should have refused this table"
    ns.nft("delete", "table", "inet", TABLE)
