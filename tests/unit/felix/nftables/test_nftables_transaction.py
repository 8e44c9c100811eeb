"""Transaction building and diffing, without a kernel: command order is the contract."""

from __future__ import annotations

import json
from typing import Any

from calico.felix.nftables.model import BaseChain, Chain, NftRule
from calico.felix.nftables.state import (
    ChainState,
    HookSpec,
    KernelState,
    MapState,
    SetState,
    render_chain,
)
from calico.felix.nftables.transaction import Desired, Dirty, build_plan

ACCEPT = {"accept": None}


def jump(target: str) -> dict[str, Any]:
    return {"jump": {"target": target}}


def in_set(name: str) -> dict[str, Any]:
    left = {"payload": {"protocol": "ip", "field": "saddr"}}
    return {"match": {"op": "==", "left": left, "right": f"@{name}"}}


def desired(*chains: Chain, sets: dict[str, SetState] | None = None, maps=None) -> Desired:
    return Desired(
        chains={c.name: render_chain(c) for c in chains}, sets=sets or {}, maps=maps or {}
    )


def known_from(d: Desired) -> KernelState:
    """The kernel state an earlier successful apply of ``d`` would have left."""
    return KernelState(
        table_exists=True,
        chains={n: rc.state for n, rc in d.chains.items()},
        sets={n: SetState(s.type, s.interval, set(s.elements)) for n, s in d.sets.items()},
        maps={n: MapState(m.key_type, dict(m.elements)) for n, m in d.maps.items()},
    )


def all_dirty(*states: Desired | KernelState) -> Dirty:
    dirty = Dirty()
    dirty.mark_all(*states)
    return dirty


def ops(commands: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(verb, kind, name-or-chain) per command, for order assertions."""
    out = []
    for c in commands:
        ((verb, body),) = c.items()
        ((kind, obj),) = body.items()
        out.append((verb, kind, obj.get("name") or obj.get("chain", "")))
    return out


def test_new_table_forward_references_then_rules() -> None:
    d = desired(
        Chain("filter-a", [NftRule([jump("filter-b")], "to b")]),
        Chain("filter-b", [NftRule([in_set("s"), ACCEPT])]),
        sets={"s": SetState("ipv4_addr", True, {"10.0.0.0/24"})},
    )
    plan = build_plan("inet", "calico", d, KernelState(), all_dirty(d))
    assert ops(plan.commands) == [
        ("add", "table", "calico"),
        ("add", "set", "s"),
        ("add", "chain", "filter-a"),
        ("add", "chain", "filter-b"),
        ("add", "rule", "filter-a"),
        ("add", "rule", "filter-b"),
    ]
    rule = plan.commands[4]["add"]["rule"]
    assert rule["comment"].startswith("cali:") and rule["comment"].endswith("; to b")
    assert plan.commands[1]["add"]["set"]["flags"] == ["interval"]
    assert "elem" not in plan.commands[1]["add"]["set"]  # built only for libnftables
    assert plan.json_commands()[1]["add"]["set"]["elem"] == [
        {"prefix": {"addr": "10.0.0.0", "len": 24}}
    ]
    # The key lands last, where the eager build put it: the JSON text libnftables gets is the
    # same; a second call changes nothing.
    assert list(plan.commands[1]["add"]["set"])[-1] == "elem"
    text = json.dumps(plan.json_commands())
    assert json.dumps(plan.json_commands()) == text


def test_nothing_differs_means_no_commands() -> None:
    d = desired(Chain("filter-a", [NftRule([ACCEPT])]))
    plan = build_plan("inet", "calico", d, known_from(d), all_dirty(d))
    assert plan.empty


def test_only_differing_dirty_chains_rewritten_wholesale() -> None:
    old = desired(Chain("filter-a", [NftRule([ACCEPT])]), Chain("filter-b", [NftRule([ACCEPT])]))
    new = desired(
        Chain("filter-a", [NftRule([ACCEPT])]),
        Chain("filter-b", [NftRule([ACCEPT]), NftRule([{"drop": None}])]),
    )
    plan = build_plan("inet", "calico", new, known_from(old), all_dirty(new))
    assert ops(plan.commands) == [
        ("add", "table", "calico"),
        ("flush", "chain", "filter-b"),
        ("add", "chain", "filter-b"),
        ("add", "rule", "filter-b"),
        ("add", "rule", "filter-b"),
    ]
    assert plan.stats.chains_written == ["filter-b"]
    # A chain that is not marked dirty is not even looked at.
    assert build_plan("inet", "calico", new, known_from(old), Dirty()).empty


def test_stale_objects_deleted_last_maps_sets_then_chains() -> None:
    old = desired(
        Chain("filter-x", [NftRule([in_set("s"), jump("filter-y")])]),
        Chain("filter-y", [NftRule([ACCEPT])]),
        sets={"s": SetState("ipv4_addr", False, {"10.0.0.1"})},
        maps={"m": MapState("ifname", {"cali1": ("goto", "filter-y")})},
    )
    new = desired(Chain("filter-keep", [NftRule([ACCEPT])]))
    plan = build_plan("inet", "calico", new, known_from(old), all_dirty(new, known_from(old)))
    assert ops(plan.commands) == [
        ("add", "table", "calico"),
        ("flush", "chain", "filter-x"),
        ("flush", "chain", "filter-y"),
        ("add", "chain", "filter-keep"),
        ("add", "rule", "filter-keep"),
        ("delete", "map", "m"),
        ("delete", "set", "s"),
        ("delete", "chain", "filter-x"),
        ("delete", "chain", "filter-y"),
    ]
    known = known_from(old)
    plan.commit(known)
    assert set(known.chains) == {"filter-keep"} and not known.sets and not known.maps


def test_set_and_map_element_deltas() -> None:
    old = desired(
        sets={"s": SetState("ipv4_addr", True, {"10.0.0.0/24", "10.9.9.9"})},
        maps={"m": MapState("ifname", {"a": ("goto", "c1"), "b": ("goto", "c1")})},
    )
    new = desired(
        sets={"s": SetState("ipv4_addr", True, {"10.0.0.0/16", "10.9.9.9"})},
        maps={"m": MapState("ifname", {"a": ("goto", "c2"), "c": ("jump", "c1")})},
    )
    known = known_from(old)
    plan = build_plan("inet", "calico", new, known, all_dirty(new))
    assert plan.json_commands()[1:] == [
        {"delete": {"element": {"family": "inet", "table": "calico", "name": "s",
                                "elem": [{"prefix": {"addr": "10.0.0.0", "len": 24}}]}}},
        {"add": {"element": {"family": "inet", "table": "calico", "name": "s",
                             "elem": [{"prefix": {"addr": "10.0.0.0", "len": 16}}]}}},
        {"delete": {"element": {"family": "inet", "table": "calico", "name": "m",
                                "elem": ["a", "b"]}}},
        {"add": {"element": {"family": "inet", "table": "calico", "name": "m",
                             "elem": [["a", {"goto": {"target": "c2"}}],
                                      ["c", {"jump": {"target": "c1"}}]]}}},
    ]  # fmt: skip
    assert (plan.stats.elements_added, plan.stats.elements_removed) == (3, 3)
    plan.commit(known)
    assert known.sets["s"].elements == {"10.0.0.0/16", "10.9.9.9"}
    assert known.maps["m"].elements == new.maps["m"].elements


def test_set_type_change_flushes_users_before_recreate() -> None:
    user = Chain("filter-u", [NftRule([in_set("s"), ACCEPT])])
    old = desired(user, sets={"s": SetState("ipv4_addr", False, {"10.0.0.1"})})
    new = desired(user, sets={"s": SetState("ipv4_addr", True, {"10.0.0.0/8"})})
    dirty = Dirty(sets={"s"})  # the user chain itself did not change
    plan = build_plan("inet", "calico", new, known_from(old), dirty)
    assert ops(plan.commands) == [
        ("add", "table", "calico"),
        ("flush", "chain", "filter-u"),
        ("delete", "set", "s"),
        ("add", "set", "s"),
        ("add", "chain", "filter-u"),
        ("add", "rule", "filter-u"),
    ]


def test_base_chain_hook_change_recreates_policy_change_updates_in_place() -> None:
    rules = [NftRule([ACCEPT])]
    old = desired(Chain("filter-F", rules, BaseChain("filter-F", "filter", "forward", 0)))
    policy = desired(
        Chain("filter-F", rules, BaseChain("filter-F", "filter", "forward", 0, "drop"))
    )
    plan = build_plan("inet", "calico", policy, known_from(old), all_dirty(policy))
    assert ops(plan.commands) == [("add", "table", "calico"), ("add", "chain", "filter-F")]
    assert plan.commands[1]["add"]["chain"]["policy"] == "drop"
    assert plan.stats.chains_written == []
    prio = desired(Chain("filter-F", rules, BaseChain("filter-F", "filter", "forward", 10)))
    plan = build_plan("inet", "calico", prio, known_from(old), all_dirty(prio))
    assert ops(plan.commands) == [
        ("add", "table", "calico"),
        ("flush", "chain", "filter-F"),
        ("delete", "chain", "filter-F"),
        ("add", "chain", "filter-F"),
        ("add", "rule", "filter-F"),
    ]
    assert plan.commands[3]["add"]["chain"]["prio"] == 10


def test_full_rewrite_deletes_and_readds_table_in_one_transaction() -> None:
    d = desired(
        Chain("filter-a", [NftRule([ACCEPT])]),
        maps={"m": MapState("ifname", {"x": ("goto", "filter-a")})},
    )
    junk = KernelState(True, chains={"old": ChainState(None, None, ("zz",))})
    plan = build_plan("inet", "calico", d, junk, Dirty(), full_rewrite=True)
    assert ops(plan.commands) == [
        ("add", "table", "calico"),
        ("delete", "table", "calico"),
        ("add", "table", "calico"),
        ("add", "map", "m"),
        ("add", "chain", "filter-a"),
        ("add", "rule", "filter-a"),
        ("add", "element", "m"),
    ]
    plan.commit(junk)
    assert set(junk.chains) == {"filter-a"} and set(junk.maps) == {"m"}


def test_missing_table_is_created_even_when_desired_is_empty() -> None:
    plan = build_plan("inet", "calico", Desired(), KernelState(), Dirty())
    assert ops(plan.commands) == [("add", "table", "calico")]


def test_hook_spec_from_render() -> None:
    rc = render_chain(Chain("filter-F", [], BaseChain("filter-F", "filter", "forward", -100)))
    assert rc.state.hook == HookSpec("filter", "forward", -100)
    assert rc.state.policy == "accept"
