"""NftablesTable against the real kernel, each test in its own fresh network namespace."""

from __future__ import annotations

from typing import Any

import nftables
import pytest
from netns_helpers import (
    Netns,
    RecordingNft,
    names_of,
    rule_handles,
    rules_by_chain,
    set_elements,
)

from calico.felix.nftables.model import BaseChain, Chain, NftRule, NftSet, VerdictMap, rule_hashes
from calico.felix.nftables.state import rule_text
from calico.felix.nftables.table import NftablesTable

pytestmark = pytest.mark.root

DISPATCH = "filter-cali-from-wl-dispatch"
PORTS = ("ipv4_addr", "inet_proto", "inet_service")


def saddr_in(set_name: str) -> dict[str, Any]:
    return {
        "match": {
            "op": "==",
            "left": {"payload": {"protocol": "ip", "field": "saddr"}},
            "right": f"@{set_name}",
        }
    }


def jump(chain: str) -> dict[str, Any]:
    return {"jump": {"target": chain}}


def dport(port: int) -> dict[str, Any]:
    return {
        "match": {
            "op": "==",
            "left": {"payload": {"protocol": "tcp", "field": "dport"}},
            "right": port,
        }
    }


ACCEPT: dict[str, Any] = {"accept": None}
COUNTER: dict[str, Any] = {"counter": None}


def forward_chain() -> Chain:
    vmap = {"vmap": {"key": {"meta": {"key": "iifname"}}, "data": f"@{DISPATCH}"}}
    return Chain(
        "filter-FORWARD",
        [NftRule([vmap], "endpoint dispatch")],
        BaseChain("filter-FORWARD", "filter", "forward", 0),
    )


def policy_chain(name: str, port: int) -> Chain:
    return Chain(
        name,
        [
            NftRule([saddr_in("cali40allowed"), dport(port), COUNTER, ACCEPT], f"allow {port}"),
            NftRule([{"drop": None}], "default deny"),
        ],
    )


def load_sample(t: NftablesTable) -> None:
    """A small but complete dataplane: base chain -> vmap -> endpoint chains -> policy chains."""
    t.set_set(NftSet("cali40allowed", "ipv4_addr", True, {"10.65.0.0/24", "192.168.1.1"}))
    t.set_set(NftSet("cali40ports", PORTS, False, {("10.65.0.1", "tcp", 80)}))
    t.set_map(
        VerdictMap(
            DISPATCH,
            elements={
                "calia": ("goto", "filter-cali-fw-calia"),
                "calib": ("goto", "filter-cali-fw-calib"),
            },
        )
    )
    t.set_chain(forward_chain())
    for iface, pol in (("calia", "filter-cali-pi-a"), ("calib", "filter-cali-pi-b")):
        t.set_chain(Chain(f"filter-cali-fw-{iface}", [NftRule([jump(pol)], "policy")]))
    t.set_chain(policy_chain("filter-cali-pi-a", 80))
    t.set_chain(policy_chain("filter-cali-pi-b", 443))


def new_table(ns: Netns, **kw: Any) -> tuple[NftablesTable, RecordingNft]:
    def make() -> tuple[NftablesTable, RecordingNft]:
        rec = RecordingNft(nftables.Nftables())
        return NftablesTable(nft=rec, **kw), rec

    return ns.call(make)


def applied(ns: Netns, t: NftablesTable) -> Any:
    result = ns.call(t.apply)
    assert result.ok, result.error
    return result


def test_full_program_and_read_back(netns: Netns) -> None:
    t, rec = new_table(netns)
    load_sample(t)
    result = applied(netns, t)
    assert len(rec.transactions()) == 1  # everything in one json_cmd
    objs = netns.listing()
    assert names_of(objs, "chain") == {
        "filter-FORWARD",
        "filter-cali-fw-calia",
        "filter-cali-fw-calib",
        "filter-cali-pi-a",
        "filter-cali-pi-b",
    }
    assert names_of(objs, "set") == {"cali40allowed", "cali40ports"}
    assert names_of(objs, "map") == {DISPATCH}
    base = next(o["chain"] for o in objs if o.get("chain", {}).get("name") == "filter-FORWARD")
    assert (base["type"], base["hook"], base["prio"], base["policy"]) == (
        "filter",
        "forward",
        0,
        "accept",
    )
    assert sorted(map(str, set_elements(objs, "cali40allowed"))) == sorted(
        map(str, [{"prefix": {"addr": "10.65.0.0", "len": 24}}, "192.168.1.1"])
    )
    assert set_elements(objs, "cali40ports") == [{"concat": ["10.65.0.1", "tcp", 80]}]
    assert sorted(result.stats.chains_written) == sorted(names_of(objs, "chain"))


def test_rule_comments_carry_hashes(netns: Netns) -> None:
    t, _ = new_table(netns)
    long = Chain("filter-cali-long", [NftRule([ACCEPT], "é" * 200), NftRule([ACCEPT])])
    t.set_chain(long)
    pol = policy_chain("filter-cali-pi-a", 80)
    t.set_set(NftSet("cali40allowed", "ipv4_addr", True, set()))
    t.set_chain(pol)
    applied(netns, t)
    rules = rules_by_chain(netns.listing())
    for chain in (long, pol):
        hashes = rule_hashes(chain.name, [rule_text(r) for r in chain.rules])
        comments = [r["comment"] for r in rules[chain.name]]
        assert [c.split(";")[0] for c in comments] == [f"cali:{h}" for h in hashes]
        assert all(len(c.encode()) <= 128 for c in comments)
    assert rules["filter-cali-pi-a"][0]["comment"].endswith("; allow 80")
    assert rules["filter-cali-long"][1]["comment"].endswith(";")


def test_only_dirty_chains_are_rewritten(netns: Netns) -> None:
    t, rec = new_table(netns)
    load_sample(t)
    applied(netns, t)
    before = rule_handles(netns.listing())
    t.set_chain(policy_chain("filter-cali-pi-a", 80))  # identical: not even dirty
    assert ns_apply_calls(netns, t, rec) == 0
    t.set_chain(policy_chain("filter-cali-pi-b", 8443))
    result = applied(netns, t)
    assert result.stats.chains_written == ["filter-cali-pi-b"]
    after = rule_handles(netns.listing())
    for chain, handles in before.items():
        if chain == "filter-cali-pi-b":
            assert not set(handles) & set(after[chain])
        else:
            assert after[chain] == handles, chain


def ns_apply_calls(ns: Netns, t: NftablesTable, rec: RecordingNft) -> int:
    n = len(rec.calls)
    applied(ns, t)
    return len(rec.calls) - n


def test_steady_state_apply_makes_no_kernel_call(netns: Netns) -> None:
    t, rec = new_table(netns)
    load_sample(t)
    applied(netns, t)
    for _ in range(3):
        assert ns_apply_calls(netns, t, rec) == 0
    assert not t.dirty


def test_forward_references_in_one_transaction(netns: Netns) -> None:
    t, rec = new_table(netns)
    # "a" jumps to "z" and the vmap targets "m": all created in the same transaction.
    t.set_chain(Chain("filter-a", [NftRule([jump("filter-z")])]))
    t.set_chain(Chain("filter-z", [NftRule([jump("filter-m")])]))
    t.set_chain(Chain("filter-m", [NftRule([ACCEPT])]))
    t.set_map(VerdictMap("filter-disp", elements={"cali0": ("goto", "filter-m")}))
    applied(netns, t)
    # An existing chain now jumps to a brand new one.
    t.set_chain(Chain("filter-a", [NftRule([jump("filter-new")])]))
    t.set_chain(Chain("filter-new", [NftRule([ACCEPT])]))
    result = applied(netns, t)
    assert sorted(result.stats.chains_written) == ["filter-a", "filter-new"]
    assert len(rec.transactions()) == 2
    rules = rules_by_chain(netns.listing())
    assert rules["filter-a"][0]["expr"] == [{"jump": {"target": "filter-new"}}]


def test_stale_objects_deleted_last(netns: Netns) -> None:
    t, _ = new_table(netns)
    load_sample(t)
    applied(netns, t)
    # Remove endpoint b everywhere: its map element, its chain, its policy; plus an unused set.
    t.remove_map_element(DISPATCH, "calib")
    t.remove_chain("filter-cali-fw-calib")
    t.remove_chain("filter-cali-pi-b")
    t.remove_set("cali40ports")
    result = applied(netns, t)
    assert sorted(result.stats.chains_deleted) == ["filter-cali-fw-calib", "filter-cali-pi-b"]
    objs = netns.listing()
    assert "filter-cali-pi-b" not in names_of(objs, "chain")
    assert names_of(objs, "set") == {"cali40allowed"}
    assert set_elements(objs, DISPATCH) == [["calia", {"goto": {"target": "filter-cali-fw-calia"}}]]
    # A chain and the set its only rule uses, both dropped at once.
    t.remove_chain("filter-cali-fw-calia")
    t.remove_map(DISPATCH)
    t.remove_chain("filter-FORWARD")
    t.remove_chain("filter-cali-pi-a")
    t.remove_set("cali40allowed")
    applied(netns, t)
    objs = netns.listing()
    assert names_of(objs, "chain") == names_of(objs, "set") == names_of(objs, "map") == set()


def test_set_deltas_interval_and_concat(netns: Netns) -> None:
    t, rec = new_table(netns)
    load_sample(t)
    applied(netns, t)
    handles = {o["set"]["name"]: o["set"]["handle"] for o in netns.listing() if "set" in o}
    t.add_set_members("cali40allowed", ["172.16.0.0/12", "10.0.0.7/32"])
    t.remove_set_members("cali40allowed", ["192.168.1.1"])
    t.add_set_members("cali40ports", [("10.65.0.2", "udp", 53), ("10.65.0.3", 6, "8080")])
    result = applied(netns, t)
    assert (result.stats.elements_added, result.stats.elements_removed) == (4, 1)
    txn = rec.transactions()[-1]
    assert not any("set" in next(iter(c.values())) for c in txn)  # no set re-created
    objs = netns.listing()
    assert {o["set"]["name"]: o["set"]["handle"] for o in objs if "set" in o} == handles
    allowed = set_elements(objs, "cali40allowed")
    assert {"prefix": {"addr": "172.16.0.0", "len": 12}} in allowed
    assert "10.0.0.7" in allowed and "192.168.1.1" not in allowed
    ports = set_elements(objs, "cali40ports")
    assert {"concat": ["10.65.0.2", "udp", 53]} in ports
    assert {"concat": ["10.65.0.3", "tcp", 8080]} in ports
    # Widening a CIDR: the narrower one must leave before the overlapping one arrives.
    t.set_set(NftSet("cali40allowed", "ipv4_addr", True, {"10.65.0.0/16", "172.16.0.0/12"}))
    applied(netns, t)
    assert sorted(map(str, set_elements(netns.listing(), "cali40allowed"))) == sorted(
        map(
            str,
            [
                {"prefix": {"addr": "10.65.0.0", "len": 16}},
                {"prefix": {"addr": "172.16.0.0", "len": 12}},
            ],
        )
    )


def test_set_type_change_recreates_set_and_users(netns: Netns) -> None:
    t, _ = new_table(netns)
    load_sample(t)
    applied(netns, t)
    t.set_set(NftSet("cali40allowed", "ipv4_addr", False, {"10.9.9.9"}))  # interval flag dropped
    result = applied(netns, t)
    assert result.stats.sets_created == 1
    assert sorted(result.stats.chains_written) == ["filter-cali-pi-a", "filter-cali-pi-b"]
    objs = netns.listing()
    s = next(o["set"] for o in objs if o.get("set", {}).get("name") == "cali40allowed")
    assert "flags" not in s and s["elem"] == ["10.9.9.9"]


def test_verdict_map_dispatch(netns: Netns) -> None:
    t, _ = new_table(netns)
    load_sample(t)
    applied(netns, t)
    rules = rules_by_chain(netns.listing())
    assert rules["filter-FORWARD"][0]["expr"] == [
        {"vmap": {"key": {"meta": {"key": "iifname"}}, "data": f"@{DISPATCH}"}}
    ]
    t.set_chain(Chain("filter-cali-fw-calic", [NftRule([{"drop": None}])]))
    t.set_map_element(DISPATCH, "calic", ("goto", "filter-cali-fw-calic"))
    t.set_map_element(DISPATCH, "calia", ("jump", "filter-cali-fw-calib"))  # changed verdict
    t.remove_map_element(DISPATCH, "calib")
    applied(netns, t)
    elems = {k: v for k, v in set_elements(netns.listing(), DISPATCH)}
    assert elems == {
        "calia": {"jump": {"target": "filter-cali-fw-calib"}},
        "calic": {"goto": {"target": "filter-cali-fw-calic"}},
    }


def test_drift_repair_after_table_deleted(netns: Netns) -> None:
    now = [1000.0]
    t, _ = new_table(netns, clock=lambda: now[0], refresh_interval=180.0)
    load_sample(t)
    applied(netns, t)
    netns.nft("delete", "table", "inet", "calico")
    assert not t.needs_refresh()
    now[0] += 181
    assert t.needs_refresh() and t.dirty
    result = applied(netns, t)
    assert result.resynced
    objs = netns.listing()
    assert len(names_of(objs, "chain")) == 5 and names_of(objs, "map") == {DISPATCH}
    assert set_elements(objs, "cali40ports") == [{"concat": ["10.65.0.1", "tcp", 80]}]
    assert t.next_refresh == now[0] + 180


def test_drift_repair_after_flush_chain(netns: Netns) -> None:
    t, _ = new_table(netns)
    load_sample(t)
    applied(netns, t)
    before = rule_handles(netns.listing())
    netns.nft("flush", "chain", "inet", "calico", "filter-cali-pi-a")
    t.invalidate()
    result = applied(netns, t)
    assert result.stats.chains_written == ["filter-cali-pi-a"]
    after = rule_handles(netns.listing())
    assert len(after["filter-cali-pi-a"]) == 2
    assert {c: h for c, h in after.items() if c != "filter-cali-pi-a"} == {
        c: h for c, h in before.items() if c != "filter-cali-pi-a"
    }


def test_drift_repair_after_foreign_rule_and_objects(netns: Netns) -> None:
    t, _ = new_table(netns)
    load_sample(t)
    applied(netns, t)
    before = rule_handles(netns.listing())
    netns.nft("add", "rule", "inet", "calico", "filter-cali-pi-b", "accept")
    netns.nft("add", "chain", "inet", "calico", "intruder")
    netns.nft("add", "set", "inet", "calico", "intruder-set", "{ type ipv4_addr; }")
    netns.nft("add", "element", "inet", "calico", "cali40allowed", "{ 1.2.3.4 }")
    netns.nft("delete", "element", "inet", "calico", "cali40ports", "{ 10.65.0.1 . tcp . 80 }")
    t.invalidate()
    result = applied(netns, t)
    assert result.stats.chains_written == ["filter-cali-pi-b"]
    assert result.stats.chains_deleted == ["intruder"]
    assert (result.stats.elements_added, result.stats.elements_removed) == (1, 1)
    objs = netns.listing()
    assert "intruder" not in names_of(objs, "chain")
    assert names_of(objs, "set") == {"cali40allowed", "cali40ports"}
    assert "1.2.3.4" not in set_elements(objs, "cali40allowed")
    assert set_elements(objs, "cali40ports") == [{"concat": ["10.65.0.1", "tcp", 80]}]
    after = rule_handles(objs)
    assert len(after["filter-cali-pi-b"]) == 2
    assert after["filter-cali-pi-a"] == before["filter-cali-pi-a"]


def test_failure_keeps_kernel_state_and_recovers(netns: Netns) -> None:
    t, _ = new_table(netns)
    load_sample(t)
    applied(netns, t)
    before = netns.listing()
    t.set_set(NftSet("cali40new", "ipv4_addr", False, {"10.1.1.1"}))
    t.set_chain(Chain("filter-cali-pi-a", [NftRule([{"bogus-statement": 1}])]))
    result = netns.call(t.apply)
    assert not result.ok and "bogus-statement" in (result.error or "")
    assert t.consecutive_failures == 1 and t.dirty
    # A kernel-level rejection (jump to a chain that does not exist) is atomic too.
    t.set_chain(Chain("filter-cali-pi-a", [NftRule([jump("filter-missing")])]))
    result = netns.call(t.apply)
    assert not result.ok and result.resynced
    assert netns.listing() == before  # the new set was not half-applied
    t.set_chain(policy_chain("filter-cali-pi-a", 8080))
    result = applied(netns, t)
    assert not result.full_rewrite and t.consecutive_failures == 0
    objs = netns.listing()
    assert "cali40new" in names_of(objs, "set")
    assert rules_by_chain(objs)["filter-cali-pi-a"][0]["expr"][1]["match"]["right"] == 8080


def test_repeated_failures_readd_whole_table(netns: Netns) -> None:
    t, rec = new_table(netns, max_failures=3)
    load_sample(t)
    applied(netns, t)
    netns.nft("add", "chain", "inet", "calico", "leftover")
    t.set_chain(policy_chain("filter-cali-pi-a", 81))
    rec.fail_next = 3
    for i in range(3):
        result = netns.call(t.apply)
        assert not result.ok and t.consecutive_failures == i + 1
    result = applied(netns, t)
    assert result.full_rewrite and not result.resynced
    txn = rec.transactions()[-1]
    assert [next(iter(c)) for c in txn[:3]] == ["add", "delete", "add"]
    assert all("table" in c[next(iter(c))] for c in txn[:3])
    objs = netns.listing()
    assert "leftover" not in names_of(objs, "chain")
    assert len(names_of(objs, "chain")) == 5
    assert t.consecutive_failures == 0
    assert ns_apply_calls(netns, t, rec) == 0  # and we know exactly what is there


def test_restart_reaches_desired_state_without_rewriting(netns: Netns) -> None:
    t1, _ = new_table(netns)
    load_sample(t1)
    applied(netns, t1)
    before = netns.listing()
    t2, rec2 = new_table(netns)
    load_sample(t2)
    result = applied(netns, t2)
    assert result.resynced and result.commands == 0
    assert result.stats.chains_written == []
    assert len(rec2.calls) == 1  # the readback only
    assert netns.listing() == before
    # A third incarnation whose desired state differs in one chain rewrites only that chain.
    t3, _ = new_table(netns)
    load_sample(t3)
    t3.set_chain(policy_chain("filter-cali-pi-b", 9000))
    result = applied(netns, t3)
    assert result.stats.chains_written == ["filter-cali-pi-b"]
    after = rule_handles(netns.listing())
    assert after["filter-cali-pi-a"] == rule_handles(before)["filter-cali-pi-a"]


def test_base_chain_policy_and_priority_changes(netns: Netns) -> None:
    t, _ = new_table(netns)
    fwd = forward_chain()
    t.set_map(VerdictMap(DISPATCH))
    t.set_chain(fwd)
    applied(netns, t)
    assert fwd.base is not None
    t.set_chain(Chain(fwd.name, fwd.rules, BaseChain(fwd.name, "filter", "forward", 0, "drop")))
    result = applied(netns, t)
    assert result.stats.chains_written == []  # policy changes in place
    t.set_chain(Chain(fwd.name, fwd.rules, BaseChain(fwd.name, "filter", "forward", 10, "drop")))
    applied(netns, t)
    chain = next(o["chain"] for o in netns.listing() if "chain" in o)
    assert (chain["prio"], chain["policy"]) == (10, "drop")
