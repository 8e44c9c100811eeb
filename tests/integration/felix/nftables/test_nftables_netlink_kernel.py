"""The netlink element encoder against the kernel, with libnftables as the reference.

Each property test runs random add/delete sequences twice in one fresh namespace: on set ``a``
through :class:`NetlinkElements`, on its twin ``b`` through libnftables JSON. After every step
both listings must be identical and equal to the model. The table tests check the fast path is
taken for element deltas (alone or with encodable chain writes) and that a rejected batch fails
cleanly and resyncs.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from typing import Any

import nftables
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from netns_helpers import Netns, RecordingNft, fresh_netns, set_elements

from calico.felix.nftables.elements import canonical, to_json, verdict_json
from calico.felix.nftables.model import Chain, NftRule, NftSet, VerdictMap
from calico.felix.nftables.netlink import ElementBatch, NetlinkElements, map_elem, set_member_elems
from calico.felix.nftables.table import NftablesTable

pytestmark = pytest.mark.root

PORTS = ("ipv4_addr", "inet_proto", "inet_service")
# Disjoint blocks, each offering several spellings of one member; neighbours are adjacent, and
# the bottom and top of the address space are in (0.0.0.0 start, open-ended last interval).
V4_BLOCKS = [
    ["0.0.0.0", "0.0.0.0/24", "0.0.0.1-0.0.0.9"],
    *[
        [f"10.0.{i}.0/24", f"10.0.{i}.7", f"10.0.{i}.3-10.0.{i}.9", f"10.0.{i}.16/28"]
        for i in range(8)
    ],
    ["255.255.255.0/24", "255.255.255.255", "255.255.255.200-255.255.255.255"],
]
V6_BLOCKS = [
    ["::", "::/120"],
    *[
        [f"2001:db8:0:{i}::/64", f"2001:db8:0:{i}::5", f"2001:db8:0:{i}::1-2001:db8:0:{i}::9"]
        for i in range(4)
    ],
    ["ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff00/120", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"],
]
IFACES = [f"cali{i:x}" for i in range(6)] + ["cali0123456789a"]  # 15 chars: the longest
CHAINS = ["c1", "c2"]
VERDICTS = [("goto", "c1"), ("jump", "c2"), ("accept", ""), ("drop", ""), ("return", "")]
CONCAT = [(f"10.1.0.{i}", proto, port) for i in (1, 2) for proto in (6, 17) for port in (53, 443)]


@pytest.fixture(scope="module")
def ns() -> Iterator[Netns]:
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"):
        pytest.skip("needs root, iproute2 and nft")
    with fresh_netns("calnl") as n:
        try:
            yield n
        finally:
            sender = _SENDERS.pop(n.name, None)
            if sender is not None:
                n.call(sender.close)


_SENDERS: dict[str, NetlinkElements] = {}


def nft_json(ns: Netns, cmds: list[dict[str, Any]]) -> None:
    def run() -> None:
        rc, _, err = nftables.Nftables().json_cmd({"nftables": cmds})
        assert rc == 0, err

    ns.call(run)


def listed(ns: Netns, name: str) -> list[Any]:
    out = json.loads(ns.nft("-j", "list", "table", "inet", "nl"))["nftables"]
    return sorted(set_elements(out, name), key=repr)


def declare(ns: Netns, *lines: str) -> None:
    """Fresh ``inet nl`` table holding the given declarations (nft syntax, one per line)."""
    ns.nft("delete", "table", "inet", "nl", check=False)
    text = "table inet nl {\n" + "\n".join(lines) + "\n}\n"
    path = f"/tmp/calnl-{os.getpid()}.nft"
    with open(path, "w") as f:
        f.write(text)
    try:
        ns.nft("-f", path)
    finally:
        os.unlink(path)


def send(ns: Netns, batch: ElementBatch) -> str | None:
    """One long-lived sender per namespace, as a table keeps one (stale replies must not leak
    from one batch into the next)."""
    sender = _SENDERS.setdefault(ns.name, NetlinkElements())
    return ns.call(lambda: sender.send(batch))


def element_cmd(verb: str, name: str, elems: list[Any]) -> dict[str, Any]:
    return {verb: {"element": {"family": "inet", "table": "nl", "name": name, "elem": elems}}}


# ---- interval and plain sets --------------------------------------------------------------------


def steps_over(blocks: list[list[str]]) -> st.SearchStrategy[list[tuple[list[str], list[str]]]]:
    """Sequences of (adds, removes) keeping members disjoint: one member per block at a time."""

    @st.composite
    def steps(draw: st.DrawFn) -> list[tuple[list[str], list[str]]]:
        held: dict[int, str] = {}
        out = []
        for _ in range(draw(st.integers(1, 4))):
            removes = [i for i in sorted(held) if draw(st.booleans())]
            free = [i for i in range(len(blocks)) if i not in held or i in removes]
            adds = {i: draw(st.sampled_from(blocks[i])) for i in free if draw(st.booleans())}
            out.append(([adds[i] for i in sorted(adds)], [held[i] for i in removes]))
            for i in removes:
                del held[i]
            held.update(adds)
        return out

    return steps()


@pytest.mark.parametrize(
    ("typ", "blocks"), [("ipv4_addr", V4_BLOCKS), ("ipv6_addr", V6_BLOCKS)], ids=["v4", "v6"]
)
def test_interval_set_deltas_match_libnftables(ns: Netns, typ: str, blocks: list) -> None:
    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(steps=steps_over(blocks))
    def check(steps: list[tuple[list[str], list[str]]]) -> None:
        declare(ns, *(f"set {n} {{ type {typ}; flags interval; }}" for n in ("a", "b")))
        model: set[Any] = set()
        for adds, removes in steps:
            batch = ElementBatch("inet", "nl")
            gone = [canonical(m, typ) for m in removes]
            new = [canonical(m, typ) for m in adds]
            batch.add(True, "a", [e for m in gone for e in set_member_elems(m, typ, True)])
            batch.add(False, "a", [e for m in new for e in set_member_elems(m, typ, True)])
            assert send(ns, batch) is None
            cmds = []
            if gone:
                cmds.append(element_cmd("delete", "b", [to_json(m, typ) for m in gone]))
            if new:
                cmds.append(element_cmd("add", "b", [to_json(m, typ) for m in new]))
            if cmds:
                nft_json(ns, cmds)
            model.difference_update(gone)
            model.update(new)
            a, b = listed(ns, "a"), listed(ns, "b")
            assert a == b
            assert {canonical(e, typ) for e in a} == model
        # Interoperability (a later libnftables transaction, e.g. after a resync, edits what the
        # netlink path wrote): libnftables can remove every member we added, and vice versa.
        if model:
            nft_json(
                ns, [element_cmd("delete", "a", [to_json(m, typ) for m in sorted(model, key=repr)])]
            )
            batch = ElementBatch("inet", "nl")
            batch.add(True, "b", [e for m in model for e in set_member_elems(m, typ, True)])
            assert send(ns, batch) is None
            assert listed(ns, "a") == listed(ns, "b") == []

    check()


def test_concat_set_and_verdict_map_deltas_match_libnftables(ns: Netns) -> None:
    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        st.lists(
            st.tuples(
                st.sets(st.sampled_from(CONCAT)),
                st.dictionaries(st.sampled_from(IFACES), st.sampled_from(VERDICTS)),
            ),
            min_size=1,
            max_size=3,
        )
    )
    def check(steps: list[tuple[set[tuple[str, int, int]], dict[str, tuple[str, str]]]]) -> None:
        declare(
            ns,
            "chain c1 {}",
            "chain c2 {}",
            *(f"set {n} {{ type ipv4_addr . inet_proto . inet_service; }}" for n in "ab"),
            *(f"map m{n} {{ type ifname : verdict; }}" for n in "ab"),
        )
        members: set[tuple[str, int, int]] = set()
        vmap: dict[str, tuple[str, str]] = {}
        for want_members, want_map in steps:
            batch = ElementBatch("inet", "nl")
            gone, new = sorted(members - want_members), sorted(want_members - members)
            stale = sorted(k for k, v in vmap.items() if want_map.get(k) != v)
            fresh = sorted(k for k, v in want_map.items() if vmap.get(k) != v)
            batch.add(True, "a", [e for m in gone for e in set_member_elems(m, PORTS, False)])
            batch.add(False, "a", [e for m in new for e in set_member_elems(m, PORTS, False)])
            batch.add(True, "ma", [map_elem(k, "ifname", None) for k in stale])
            batch.add(False, "ma", [map_elem(k, "ifname", want_map[k]) for k in fresh])
            assert send(ns, batch) is None
            cmds = [
                element_cmd("delete", "b", [to_json(m, PORTS) for m in gone]),
                element_cmd("add", "b", [to_json(m, PORTS) for m in new]),
                element_cmd("delete", "mb", stale),
                element_cmd("add", "mb", [[k, verdict_json(want_map[k])] for k in fresh]),
            ]
            cmds = [c for c in cmds if next(iter(c.values()))["element"]["elem"]]
            if cmds:
                nft_json(ns, cmds)
            members, vmap = set(want_members), dict(want_map)
            assert listed(ns, "a") == listed(ns, "b")
            assert listed(ns, "ma") == listed(ns, "mb")
            assert {canonical(e, PORTS) for e in listed(ns, "a")} == members
            assert {k: tuple(v) for k, v in _map_items(listed(ns, "ma"))} == vmap

    check()


def _map_items(elems: list[Any]) -> Iterator[tuple[str, tuple[str, str]]]:
    for key, verdict in elems:
        ((kind, arg),) = verdict.items()
        yield key, (kind, arg["target"] if isinstance(arg, dict) else "")


def test_kernel_error_is_reported_and_nothing_applied(ns: Netns) -> None:
    declare(ns, "set a { type ipv4_addr; flags interval; }")
    ok = ElementBatch("inet", "nl")
    ok.add(False, "a", set_member_elems("10.9.0.5", "ipv4_addr", True))
    assert send(ns, ok) is None
    # One batch: a valid add, then a removal of a member the set does not hold.
    bad = ElementBatch("inet", "nl")
    bad.add(False, "a", set_member_elems("10.9.1.0/24", "ipv4_addr", True))
    bad.add(True, "a", set_member_elems("10.9.2.1", "ipv4_addr", True))
    error = send(ns, bad)
    assert error == "deleting elements of a: No such file or directory (ENOENT)"
    assert listed(ns, "a") == ["10.9.0.5"]  # the add in the same batch was rolled back
    missing = ElementBatch("inet", "nl")
    missing.add(False, "nosuchset", set_member_elems("10.9.0.6", "ipv4_addr", True))
    assert send(ns, missing) == "adding elements of nosuchset: No such file or directory (ENOENT)"
    # The same socket carries on after the errors.
    again = ElementBatch("inet", "nl")
    again.add(False, "a", set_member_elems("10.9.3.0/24", "ipv4_addr", True))
    assert send(ns, again) is None
    assert listed(ns, "a") == sorted(
        ["10.9.0.5", {"prefix": {"addr": "10.9.3.0", "len": 24}}], key=repr
    )


# ---- NftablesTable's fast path ------------------------------------------------------------------


class CountingSender(NetlinkElements):
    def __init__(self) -> None:
        super().__init__()
        self.batches = 0

    def send(self, batch: ElementBatch) -> str | None:
        self.batches += 1
        return super().send(batch)


def saddr_rule(set_name: str) -> NftRule:
    left = {"payload": {"protocol": "ip", "field": "saddr"}}
    match = {"match": {"op": "==", "left": left, "right": f"@{set_name}"}}
    return NftRule([match, {"accept": None}], "allow")


def test_table_sends_element_only_deltas_over_netlink(netns: Netns) -> None:
    def make() -> tuple[NftablesTable, RecordingNft, CountingSender]:
        rec, sender = RecordingNft(nftables.Nftables()), CountingSender()
        return NftablesTable(nft=rec, netlink=sender), rec, sender

    t, rec, sender = netns.call(make)
    t.set_set(NftSet("cali40s", "ipv4_addr", True, {"10.65.0.0/24"}))
    t.set_set(NftSet("cali40p", PORTS, False, {("10.65.0.1", "tcp", 80)}))
    t.set_map(VerdictMap("disp", elements={"calia": ("goto", "pol")}))
    t.set_chain(Chain("pol", [saddr_rule("cali40s")]))
    first = netns.call(t.apply)
    assert first.ok and not first.netlink and sender.batches == 0  # creation: libnftables

    before = len(rec.transactions())
    t.add_set_members("cali40s", ["10.66.0.1", "10.67.0.0/16"])
    t.remove_set_members("cali40s", ["10.65.0.0/24"])
    t.add_set_members("cali40p", [("10.65.0.2", "udp", 53)])
    t.set_map_element("disp", "calia", ("jump", "pol"))  # changed verdict: delete + add
    t.set_map_element("disp", "calib", ("goto", "pol"))
    delta = netns.call(t.apply)
    assert delta.ok and delta.netlink and delta.kernel_calls == 1, delta
    assert sender.batches == 1 and len(rec.transactions()) == before
    assert (delta.stats.elements_added, delta.stats.elements_removed) == (5, 2)
    objs = netns.listing()
    assert sorted(map(repr, set_elements(objs, "cali40s"))) == sorted(
        map(repr, ["10.66.0.1", {"prefix": {"addr": "10.67.0.0", "len": 16}}])
    )
    assert len(set_elements(objs, "cali40p")) == 2
    assert sorted(set_elements(objs, "disp")) == [
        ["calia", {"jump": {"target": "pol"}}],
        ["calib", {"goto": {"target": "pol"}}],
    ]
    # Our picture stayed exact: a resync finds nothing to do.
    t.invalidate()
    resync = netns.call(t.apply)
    assert resync.ok and resync.resynced and resync.commands == 0

    # A chain change with elements in the same delta is one netlink batch too...
    t.add_set_members("cali40s", ["10.68.0.1"])
    t.set_chain(Chain("pol", [NftRule([{"drop": None}], "deny")]))
    mixed = netns.call(t.apply)
    assert mixed.ok and mixed.netlink and sender.batches == 2
    assert len(rec.transactions()) == before
    # ...unless a rule is not encodable (``ip saddr`` without ``meta nfproto``: libnftables
    # would add the dependency itself): then one libnftables transaction, no netlink.
    t.add_set_members("cali40s", ["10.69.0.1"])
    t.set_chain(Chain("pol", [saddr_rule("cali40s"), NftRule([{"drop": None}], "deny")]))
    mixed = netns.call(t.apply)
    assert mixed.ok and not mixed.netlink and sender.batches == 2
    assert len(rec.transactions()) == before + 1


def test_table_netlink_failure_resyncs_and_recovers(netns: Netns) -> None:
    def make() -> NftablesTable:
        return NftablesTable(nft=nftables.Nftables(), netlink=NetlinkElements())

    t = netns.call(make)
    t.set_set(NftSet("cali40s", "ipv4_addr", True, {"10.65.0.1"}))
    assert netns.call(t.apply).ok
    netns.nft("add", "element", "inet", "calico", "cali40s", "{ 10.70.0.5 }")  # foreign member
    t.add_set_members("cali40s", ["10.70.0.0/24"])  # overlaps it: the kernel refuses
    failed = netns.call(t.apply)
    assert not failed.ok and failed.netlink
    assert failed.error is not None and failed.error.startswith("adding elements of cali40s: ")
    assert t.consecutive_failures == 1
    recovered = netns.call(t.apply)  # reads back, removes the foreign member, adds ours
    assert recovered.ok and recovered.resynced, recovered
    members = set_elements(netns.listing(), "cali40s")
    assert sorted(map(repr, members)) == sorted(
        map(repr, ["10.65.0.1", {"prefix": {"addr": "10.70.0.0", "len": 24}}])
    )
