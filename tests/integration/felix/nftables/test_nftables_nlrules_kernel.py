"""Whole transactions over netlink against the kernel, with libnftables as the reference.

Two tables in one fresh namespace get the same desired state and the same sequence of changes:
``nla`` through an :class:`NftablesTable` with a netlink sender, ``nlb`` through one without
(libnftables only). After every apply both ``nft -j list`` outputs must be identical (up to the
table name), and ``nla``'s deltas must really have gone as netlink batches. Statements are
drawn from what the rule renderer emits (design/felix-nftables.md "Transactions over netlink").
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Iterator
from typing import Any

import nftables
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from netns_helpers import Netns, fresh_netns

from calico.felix.messages import (
    ICMPTypeCode,
    Policy,
    PolicyID,
    PortRange,
    Profile,
    Rule,
    TierInfo,
    WorkloadEndpoint,
)
from calico.felix.nftables.model import Chain, NftRule, NftSet, VerdictMap, ipset_name
from calico.felix.nftables.netlink import NetlinkElements, Unencodable
from calico.felix.nftables.nlrules import rule_body
from calico.felix.nftables.table import ApplyResult, NftablesTable
from calico.felix.rules import RuleRenderer
from calico.felix.rules import exprs as x
from calico.felix.rules.config import RenderConfig
from calico.felix.rules.endpoint_dispatch import dispatch_chains, dispatch_maps
from calico.felix.rules.endpoints import workload_endpoint_chains
from calico.felix.rules.nflog import nflog
from calico.felix.rules.policy import policy_chain_name, profile_chain_name

pytestmark = pytest.mark.root

PORTS = ("ipv4_addr", "inet_proto", "inet_service")
TARGETS = ["tgt1", "tgt2"]
WORK = ["w1", "w2", "w3"]
SETS = {
    "s4": NftSet("s4", "ipv4_addr", True, {"10.0.0.0/24"}),
    "s6": NftSet("s6", "ipv6_addr", True, {"2001:db8::/64"}),
    "p4": NftSet("p4", PORTS, False, {("10.0.0.1", 6, 80)}),
}


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Netns, NftablesTable, NftablesTable]]:
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"):
        pytest.skip("needs root, iproute2 and nft")
    with fresh_netns("calnlr") as ns:

        def make() -> tuple[NftablesTable, NftablesTable]:
            a = NftablesTable("nla", nft=nftables.Nftables(), netlink=NetlinkElements())
            b = NftablesTable("nlb", nft=nftables.Nftables())
            return a, b

        a, b = ns.call(make)
        try:
            yield ns, a, b
        finally:
            sender = a._netlink
            assert isinstance(sender, NetlinkElements)
            ns.call(sender.close)


def listing(ns: Netns, table: str) -> list[dict[str, Any]]:
    out = json.loads(ns.nft("-j", "list", "table", "inet", table))["nftables"]
    objs = []
    for o in out:
        ((kind, body),) = o.items()
        if kind == "metainfo":
            continue
        body = {k: v for k, v in body.items() if k != "handle"}
        body["table"] = body.get("table") and "T"
        if kind == "table":
            body["name"] = "T"
        objs.append({kind: body})
    return objs


def both(pair: tuple[Netns, NftablesTable, NftablesTable], fn: Any) -> tuple[ApplyResult, ...]:
    ns, a, b = pair
    fn(a)
    fn(b)
    ra, rb = ns.call(a.apply), ns.call(b.apply)
    assert ra.ok, ra.error
    assert rb.ok, rb.error
    assert listing(ns, a.name) == listing(ns, b.name)
    return ra, rb


def reset(pair: tuple[Netns, NftablesTable, NftablesTable]) -> None:
    """Both tables back to the same base: target chains, sets, a dispatch map, no work chains."""

    def base(t: NftablesTable) -> None:
        for name in WORK:
            t.remove_chain(name)
        for s in SETS.values():
            t.set_set(NftSet(s.name, s.type, s.interval, set(s.elements)))
        t.set_map(VerdictMap("disp", key_type="ifname", elements={"cali0": ("goto", "tgt1")}))
        for name in TARGETS:
            t.set_chain(Chain(name, [NftRule([x.RETURN], "back")]))

    both(pair, base)


# ---- statements as the renderer emits them ------------------------------------------------------

u32 = st.integers(0, 0xFFFFFFFF)
port = st.integers(0, 0xFFFF)


@st.composite
def port_value(draw: st.DrawFn) -> Any:
    lo = draw(port)
    if lo < 0xFFFF and draw(st.booleans()):
        return {"range": [lo, draw(st.integers(lo + 1, 0xFFFF))]}
    return lo


@st.composite
def v4_value(draw: st.DrawFn) -> Any:
    raw = draw(st.integers(0, 0xFFFFFFFF))
    kind = draw(st.sampled_from(["addr", "prefix", "set"]))
    if kind == "set":
        return "@s4"
    if kind == "addr":
        return ".".join(str(b) for b in raw.to_bytes(4, "big"))
    plen = draw(st.integers(1, 31))
    net = raw & ~((1 << (32 - plen)) - 1) & 0xFFFFFFFF
    return {"prefix": {"addr": ".".join(str(b) for b in net.to_bytes(4, "big")), "len": plen}}


@st.composite
def v6_value(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["addr", "prefix", "set"]))
    if kind == "set":
        return "@s6"
    if kind == "addr":
        return draw(st.sampled_from(["::1", "2001:db8::5", "fe80::1:2", "::"]))
    plen = draw(st.sampled_from([8, 10, 48, 64, 100, 127]))
    addr = {
        8: "fe00::",
        10: "fe80::",
        48: "2001:db8:1::",
        64: "2001:db8::",
        100: "2001:db8::",
        127: "2001:db8::4",
    }[plen]
    return {"prefix": {"addr": addr, "len": plen}}


op = st.sampled_from(["==", "!="])


@st.composite
def family_matches(draw: st.DrawFn) -> list[Any]:
    """``meta nfproto`` first, then address and port matches (as ``rule_match`` orders them)."""
    v6 = draw(st.booleans())
    out = [x.nfproto(6 if v6 else 4)]
    proto = x.ADDR_PROTO[6 if v6 else 4]
    sides = draw(st.lists(st.sampled_from(["saddr", "daddr"]), max_size=2, unique=True))
    for side in sides:
        value = draw(v6_value() if v6 else v4_value())
        out.append(x.match(x.payload(proto, side), value, draw(op)))
    l4 = draw(st.sampled_from([None, 6, 17, 1 if not v6 else 58]))
    if l4 is not None:
        out.append(x.match(x.meta("l4proto"), l4))
        if l4 in (1, 58):
            name = "icmp" if l4 == 1 else "icmpv6"
            type_op = draw(op)
            out.append(x.match(x.payload(name, "type"), draw(st.integers(0, 255)), type_op))
            if draw(st.booleans()):  # type and code: libnftables merges them when ops agree
                code_op = type_op if draw(st.booleans()) else draw(op)
                out.append(x.match(x.payload(name, "code"), draw(st.integers(0, 255)), code_op))
        else:
            for field in draw(st.lists(st.sampled_from(["sport", "dport"]), max_size=2)):
                out.append(x.match(x.payload("th", field), draw(port_value()), draw(op)))
    if not v6 and draw(st.booleans()):
        left = {"concat": [x.payload("ip", "saddr"), x.meta("l4proto"), x.payload("th", "dport")]}
        out.append(x.match(left, "@p4", draw(op)))
    return out


ifname = st.sampled_from(["cali0", "cali12345678901", "eth0", "cali*", "tap*", "x*"])
states = st.lists(
    st.sampled_from(["established", "related", "invalid", "new"]),
    min_size=1,
    max_size=3,
    unique=True,
)
simple = st.one_of(
    states.map(lambda s: x.ct_state(*s)),
    u32.map(x.mark_set),
    u32.map(x.mark_clear),
    u32.map(x.mark_is_set),
    u32.map(x.mark_is_clear),
    st.tuples(ifname, op).map(lambda a: x.iifname(*a)),
    st.tuples(ifname, op).map(lambda a: x.oifname(*a)),
    st.tuples(st.booleans(), st.text("AbD|P 1-", max_size=20)).map(lambda a: nflog(*a)),
    st.just(x.COUNTER),
)
verdict = st.one_of(
    st.sampled_from([x.ACCEPT, x.DROP, x.RETURN, x.REJECT]),
    st.sampled_from(TARGETS).map(x.jump),
    st.sampled_from(TARGETS).map(x.goto),
    st.just(x.vmap(x.meta("iifname"), "disp")),
)


@st.composite
def rule(draw: st.DrawFn) -> NftRule:
    exprs = draw(family_matches()) if draw(st.booleans()) else []
    exprs += draw(st.lists(simple, max_size=2))
    if draw(st.booleans()) or not exprs:
        exprs.append(draw(verdict))
    comment = draw(st.sampled_from(["", "Return if policy accepted", "é" * 70]))
    return NftRule(exprs, comment)


@st.composite
def steps(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for _ in range(draw(st.integers(1, 3))):
        chains = draw(st.dictionaries(st.sampled_from(WORK), st.lists(rule(), max_size=4)))
        out.append(
            {
                "chains": chains,
                "drop": draw(st.lists(st.sampled_from(WORK), max_size=1)),
                "members": draw(
                    st.lists(st.sampled_from(["10.9.0.1", "10.9.1.0/24"]), unique=True)
                ),
                "disp": draw(
                    st.dictionaries(
                        st.sampled_from(["cali1", "cali2"]), st.sampled_from(TARGETS), max_size=2
                    )
                ),
            }
        )
    return out


def encodable(chains: dict[str, list[NftRule]], written: list[str]) -> bool:
    """False when a rewritten chain has a rule the encoder refuses on purpose (neighbouring
    payload compares libnftables would rewrite other than by merging)."""
    try:
        for rules in (chains[name] for name in written if name in chains):
            for r in rules:
                rule_body("w", list(r.exprs), r.comment)
    except Unencodable:
        return False
    return True


def apply_step(step: dict[str, Any]) -> Any:
    def fn(t: NftablesTable) -> None:
        for name, rules in step["chains"].items():
            t.set_chain(Chain(name, rules))
        for name in step["drop"]:
            if name not in step["chains"]:
                t.remove_chain(name)
        t.add_set_members("s4", step["members"])
        for iface, target in step["disp"].items():
            t.set_map_element("disp", iface, ("goto", target))

    return fn


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps())
def test_netlink_transactions_list_like_libnftables(
    pair: tuple[Netns, NftablesTable, NftablesTable], sequence: list[dict[str, Any]]
) -> None:
    ns, a, _ = pair
    reset(pair)
    for step in sequence:
        ra, _rb = both(pair, apply_step(step))
        if ra.commands:
            written = ra.stats.chains_written
            assert ra.netlink == encodable(step["chains"], written), "encodable: netlink"
    a.invalidate()  # our comments read back as our hashes: nothing to rewrite
    resync = ns.call(a.apply)
    assert resync.ok and resync.resynced and resync.commands == 0, resync


def test_new_workload_delta_is_one_netlink_batch(
    pair: tuple[Netns, NftablesTable, NftablesTable],
) -> None:
    """The renderer's real chains for a new workload: endpoint chains (tier, policy jumps,
    profile, flow-log NFLOGs), dispatch chains and map entries, in one batch."""
    reset(pair)
    cfg = RenderConfig(flow_logs=True)
    np1 = PolicyID("np1", "NetworkPolicy", "default", "default")
    np2 = PolicyID("np2", "StagedNetworkPolicy", "default", "default")
    tiers = (TierInfo("default", (np1, np2), (np1,)),)
    targets = [policy_chain_name(p, inbound) for p in (np1, np2) for inbound in (True, False)]
    targets += [profile_chain_name("kns.default", inbound) for inbound in (True, False)]

    def workload(i: int) -> WorkloadEndpoint:
        return WorkloadEndpoint(
            state="active", name=f"cali{i}", tiers=tiers, profile_ids=("kns.default",)
        )

    def setup(t: NftablesTable) -> None:
        for c in dispatch_chains(cfg):
            t.set_chain(c)
        for m in dispatch_maps(cfg, []):
            t.set_map(m)
        for name in targets:
            t.set_chain(Chain(name, [NftRule([x.RETURN])]))

    both(pair, setup)

    def add_pod(t: NftablesTable) -> None:
        for c in workload_endpoint_chains(cfg, "cali7", workload(7)):
            t.set_chain(c)
        for m in dispatch_maps(cfg, ["cali7"]):
            t.set_map(m)
        t.add_set_members("s4", ["10.65.0.7"])

    ra, rb = both(pair, add_pod)
    assert ra.netlink and not rb.netlink and ra.commands == rb.commands > 10


def test_unencodable_transaction_goes_through_libnftables(
    pair: tuple[Netns, NftablesTable, NftablesTable],
) -> None:
    reset(pair)
    anonymous = x.match(x.payload("th", "dport"), {"set": [1, 2]})  # anonymous set: not encoded

    def chains(t: NftablesTable) -> None:
        t.set_chain(Chain("w1", [NftRule([x.match(x.meta("l4proto"), 6), anonymous, x.ACCEPT])]))
        t.add_set_members("s4", ["10.9.0.1"])

    ra, _ = both(pair, chains)
    assert ra.ok and not ra.netlink and ra.commands

    ra, _ = both(pair, lambda t: t.set_set(NftSet("s9", "inet_service", False, {80, 443})))
    assert not ra.netlink  # creating a set of a type Felix does not use
    ra, _ = both(pair, lambda t: t.remove_set("s9"))
    assert ra.netlink

    def implicit(t: NftablesTable) -> None:  # ip saddr without nfproto: libnftables adds one
        t.set_chain(Chain("w2", [NftRule([x.match(x.payload("ip", "saddr"), "10.0.0.1")])]))

    ra, _ = both(pair, implicit)
    assert not ra.netlink


def test_rejected_netlink_transaction_changes_nothing(
    pair: tuple[Netns, NftablesTable, NftablesTable],
) -> None:
    ns, a, _ = pair
    reset(pair)
    before = listing(ns, "nla")
    a.set_chain(Chain("w1", [NftRule([x.ACCEPT])]))
    a.set_chain(Chain("w2", [NftRule([x.jump("no-such-chain")])]))
    a.add_set_members("s4", ["10.9.0.1"])
    failed = ns.call(a.apply)
    assert not failed.ok and failed.netlink
    assert failed.error is not None and failed.error.startswith("adding a rule to w2: ")
    assert listing(ns, "nla") == before  # atomic: the chain w1 and the member are not there
    a.remove_chain("w2")
    recovered = ns.call(a.apply)  # reads back first (after a failure), then w1 and the member
    assert recovered.ok and recovered.resynced, recovered
    assert any(o.get("chain", {}).get("name") == "w1" for o in listing(ns, "nla"))


# ---- the renderer's whole output, chain by chain ------------------------------------------------

SEL, NAMED = "s:sel", "n:named"
POLICY_RULES = (
    Rule("allow", protocol="tcp", src_net=("10.0.0.0/8",), dst_ports=(PortRange(80, 80),)),
    Rule("allow", protocol="tcp", dst_ports=(PortRange(1000, 2000),), not_src_net=("fd00::/64",)),
    Rule("deny", protocol="udp", not_dst_ports=(PortRange(53, 53),), not_src_net=("192.168.0.1",)),
    Rule("allow", ip_version=6, protocol="icmpv6", icmp=ICMPTypeCode(128, 0)),  # merged
    Rule("allow", protocol="icmp", not_icmp=ICMPTypeCode(13)),
    Rule("next-tier", src_ip_set_ids=(SEL,), not_dst_ip_set_ids=(SEL,)),
    Rule("allow", protocol="tcp", dst_named_port_ip_set_ids=(NAMED,)),
    Rule("allow", protocol="tcp", not_src_named_port_ip_set_ids=(NAMED,)),
    Rule("deny", not_protocol="sctp"),
    Rule("allow", dst_net=("10.1.2.0/23",)),
    Rule("allow", protocol="tcp", src_ports=(PortRange(5, 9),), dst_net=("fe80::/10",)),
)


@pytest.mark.parametrize(
    "config",
    [
        RenderConfig(),
        RenderConfig(deny_action="reject", mark_mask=0x0FF00000),
        RenderConfig(flow_logs=True),
    ],
    ids=["defaults", "reject", "flow-logs"],
)
def test_renderer_chains_list_like_libnftables(
    pair: tuple[Netns, NftablesTable, NftablesTable], config: RenderConfig
) -> None:
    """Every chain the renderer makes, written one apply at a time into tables that already
    hold the sets and maps: both listings equal after each; the endpoint and dispatch chains,
    and every policy chain without an anonymous set, go over netlink."""
    ns, netlink_table, _ = pair

    def make() -> tuple[NftablesTable, NftablesTable]:  # in the netns: handles bind it
        sender = netlink_table._netlink
        ta = NftablesTable(f"ra{len(config.ip_versions)}", nft=nftables.Nftables(), netlink=sender)
        return ta, NftablesTable(f"rb{len(config.ip_versions)}", nft=nftables.Nftables())

    a, b = ns.call(make)
    for t in (a, b):
        ns.nft("delete", "table", "inet", t.name, check=False)
    pair = (ns, a, b)
    r = RuleRenderer(config)
    pid = PolicyID("p1", "GlobalNetworkPolicy", tier="t1")
    staged = PolicyID("s1", "StagedGlobalNetworkPolicy", tier="t1")
    tiers = (TierInfo("t1", (staged, pid), (pid,), "Pass"),)
    weps = {
        f"cali{i}": WorkloadEndpoint("active", f"w{i}", profile_ids=("kns.a",), tiers=tiers)
        for i in range(3)
    }
    weps["calidown"] = WorkloadEndpoint("down", "d")
    policy = Policy(inbound_rules=POLICY_RULES, outbound_rules=POLICY_RULES)
    first = [
        *r.static_chains(),
        *r.policy_chains(pid, policy),
        *r.policy_chains(staged, Policy(inbound_rules=POLICY_RULES, staged=True)),
        *r.profile_chains("kns.a", Profile(inbound_rules=POLICY_RULES[:2])),
        *r.profile_chains("kns.log", Profile(inbound_rules=(Rule("log", protocol="tcp"),))),
    ]
    sets = [*r.static_sets()]
    for v in config.ip_versions:
        sets.append(NftSet(ipset_name(SEL, v), f"ipv{v}_addr", True))
        sets.append(NftSet(ipset_name(NAMED, v), (f"ipv{v}_addr", "inet_proto", "inet_service")))

    def base(t: NftablesTable) -> None:
        for s in sets:
            t.set_set(s)
        for m in r.dispatch_maps({}, {}):
            t.set_map(m)
        for c in r.static_chains():
            t.set_chain(c)

    both(pair, base)
    via_netlink: dict[str, bool] = {}
    later = [c for c in first if c.name not in {s.name for s in r.static_chains()}]
    for iface, ep in weps.items():
        later += r.workload_endpoint_chains(iface, ep)
    for chain in later:
        ra, _ = both(pair, lambda t, c=chain: t.set_chain(c))
        via_netlink[chain.name] = ra.netlink
    ra, _ = both(pair, lambda t: [t.set_map(m) for m in r.dispatch_maps(weps, {})])
    assert ra.netlink  # dispatch map entries: elements only
    endpoint = [n for n in via_netlink if "-cali-tw-" in n or "-cali-fw-" in n]
    assert endpoint and all(via_netlink[n] for n in endpoint), via_netlink
    policies = [n for n in via_netlink if n.startswith(("filter-cali-pi-", "filter-cali-po-"))]
    assert policies and all(via_netlink[n] for n in policies), via_netlink  # no anonymous sets
    assert via_netlink["filter-cali-pri-kns.log"] is False  # syslog ``log``: libnftables
    a.invalidate()
    resync = ns.call(a.apply)
    assert resync.ok and resync.commands == 0, resync


def test_transaction_bigger_than_default_socket_buffers_goes_as_one_batch(
    pair: tuple[Netns, NftablesTable, NftablesTable],
) -> None:
    """A new workload that activates 100 policies is ~200 KiB of batch (bench_felix.py
    --large); 600 KiB here, over the default wmem_max/rmem_max (208 KiB, doubled by the
    kernel): the sender grows its buffers and the kernel takes it whole, acks and all."""
    _ns, a, _ = pair
    reset(pair)
    comment = "c" * 100

    def many(t: NftablesTable) -> None:
        for i in range(400):
            rules = [NftRule([x.match(x.meta("l4proto"), 6), x.ACCEPT], comment) for _ in range(8)]
            t.set_chain(Chain(f"big{i}", rules))
        t.add_set_members("s4", [f"10.8.{i // 250}.{i % 250}" for i in range(2000)])

    ra, rb = both(pair, many)
    assert ra.netlink and not rb.netlink and ra.commands == rb.commands > 3600
    sender = a._netlink
    assert isinstance(sender, NetlinkElements) and sender._sock is not None
    assert sender._sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) > 600 * 1024

    def drop(t: NftablesTable) -> None:
        for i in range(400):
            t.remove_chain(f"big{i}")

    ra, _ = both(pair, drop)
    assert ra.netlink
