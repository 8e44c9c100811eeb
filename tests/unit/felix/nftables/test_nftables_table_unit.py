"""NftablesTable control flow with a fake libnftables handle: timers, failures, no-op applies."""

from __future__ import annotations

from typing import Any

import pytest

from calico.felix.nftables.model import BaseChain, Chain, NftRule, NftSet, VerdictMap
from calico.felix.nftables.table import NftablesError, NftablesTable

ACCEPT = {"accept": None}


class FakeNft:
    """Answers ``list`` from a canned listing (None: no table); fails transactions on demand."""

    def __init__(self, listing: dict[str, Any] | None = None) -> None:
        self.listing = listing
        self.calls: list[list[dict[str, Any]]] = []
        self.fail_next = 0
        self.list_error = ""

    def json_cmd(self, root: dict[str, Any]) -> tuple[int, Any, str]:
        cmds = root["nftables"]
        self.calls.append(cmds)
        if "list" in cmds[0]:
            if self.list_error:
                return 1, "", self.list_error
            if self.listing is None:
                return 1, "", "Error: No such file or directory"
            return 0, self.listing, ""
        if self.fail_next:
            self.fail_next -= 1
            return 1, "", "Error: Could not process rule: Device or resource busy\n"
        return 0, "", ""

    def transactions(self) -> list[list[dict[str, Any]]]:
        return [c for c in self.calls if "list" not in c[0]]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(listing: dict[str, Any] | None = None, **kw: Any) -> tuple[NftablesTable, FakeNft]:
    nft = FakeNft(listing)
    table = NftablesTable(nft=nft, **kw)
    table.set_chain(
        Chain(
            "filter-FORWARD",
            [NftRule([ACCEPT], "fwd")],
            BaseChain("filter-FORWARD", "filter", "forward", 0),
        )
    )
    table.set_set(NftSet("cali40s", "ipv4_addr", True, {"10.0.0.0/24"}))
    table.set_map(VerdictMap("filter-disp", elements={"cali1": ("goto", "filter-FORWARD")}))
    return table, nft


def kernel_listing_of(table: NftablesTable, nft: FakeNft) -> dict[str, Any]:
    """What the kernel would list after the fake accepted the table's transactions."""
    objs: list[dict[str, Any]] = [{"table": {"family": "inet", "name": "calico"}}]
    for name in ("filter-FORWARD",):
        rc = table.rendered_chain(name)
        assert rc is not None and rc.base is not None
        objs.append(
            {"chain": {"family": "inet", "table": "calico", "name": name, "type": "filter",
                       "hook": "forward", "prio": 0, "policy": "accept"}}
        )  # fmt: skip
        objs += [
            {"rule": {"family": "inet", "table": "calico", "chain": name, "comment": c, "expr": e}}
            for e, c in rc.rules
        ]
    objs.append(
        {"set": {"family": "inet", "table": "calico", "name": "cali40s", "type": "ipv4_addr",
                 "flags": ["interval"], "elem": [{"prefix": {"addr": "10.0.0.0", "len": 24}}]}}
    )  # fmt: skip
    objs.append(
        {"map": {"family": "inet", "table": "calico", "name": "filter-disp", "type": "ifname",
                 "map": "verdict", "elem": [["cali1", {"goto": {"target": "filter-FORWARD"}}]]}}
    )  # fmt: skip
    return {"nftables": objs}


def test_first_apply_reads_back_then_programs_in_one_transaction() -> None:
    table, nft = make()
    result = table.apply()
    assert result.ok and result.resynced and result.kernel_calls == 2
    assert len(nft.transactions()) == 1
    assert nft.transactions()[0][0] == {"add": {"table": {"family": "inet", "name": "calico"}}}


def test_clean_apply_makes_no_kernel_call() -> None:
    table, nft = make()
    table.apply()
    n = len(nft.calls)
    for _ in range(5):
        result = table.apply()
        assert result.ok and result.kernel_calls == 0 and result.commands == 0
    assert len(nft.calls) == n and not table.dirty


def test_restart_with_matching_kernel_sends_nothing() -> None:
    first, nft1 = make()
    first.apply()
    table, nft = make(kernel_listing_of(first, nft1))
    result = table.apply()
    assert result.ok and result.resynced and result.commands == 0
    assert nft.transactions() == []


def test_refresh_timer_and_invalidate() -> None:
    clock = Clock()
    table, nft = make(clock=clock, refresh_interval=180.0)
    assert table.needs_refresh()  # a new instance always reads back first
    table.apply()
    assert table.next_refresh == 280.0 and not table.needs_refresh()
    nft.listing = kernel_listing_of(table, nft)
    clock.now = 279.0
    assert table.apply().kernel_calls == 0
    clock.now = 280.0
    assert table.needs_refresh(280.0) and table.dirty
    result = table.apply()
    assert result.resynced and result.kernel_calls == 1 and result.commands == 0
    assert table.next_refresh == 460.0
    table.invalidate()
    assert table.needs_refresh() and table.apply().resynced


def test_refresh_disabled() -> None:
    table, _nft = make(refresh_interval=0)
    table.apply()
    assert table.next_refresh == float("inf")


def test_failures_keep_state_dirty_then_full_rewrite() -> None:
    table, nft = make(max_failures=3)
    table.apply()
    table.add_set_members("cali40s", ["10.1.1.1"])
    nft.fail_next = 3
    for i in range(3):
        result = table.apply()
        assert not result.ok and "busy" in (result.error or "")
        assert table.consecutive_failures == i + 1 and table.dirty
        with pytest.raises(NftablesError):
            result.raise_for_error()
    result = table.apply()
    assert result.ok and result.full_rewrite and not result.resynced
    txn = nft.transactions()[-1]
    assert [next(iter(c)) for c in txn[:3]] == ["add", "delete", "add"]
    assert table.consecutive_failures == 0
    assert table.apply().kernel_calls == 0  # the full rewrite left a known table


def test_readback_error_is_a_failure() -> None:
    table, nft = make()
    nft.list_error = "Error: Operation not permitted"
    result = table.apply()
    assert not result.ok and "not permitted" in (result.error or "")
    assert nft.transactions() == [] and table.consecutive_failures == 1


def test_identical_set_chain_is_not_dirty() -> None:
    table, _nft = make()
    table.apply()
    table.set_chain(
        Chain(
            "filter-FORWARD",
            [NftRule([ACCEPT], "fwd")],
            BaseChain("filter-FORWARD", "filter", "forward", 0),
        )
    )
    assert not table.dirty


def test_member_and_map_element_updates_are_deltas() -> None:
    table, nft = make()
    table.apply()
    table.add_set_members("cali40s", ["10.2.0.0/16", "10.0.0.0/24"])
    table.remove_set_members("cali40s", ["10.0.0.0/24"])
    table.set_map_element("filter-disp", "cali2", ("jump", "filter-FORWARD"))
    table.remove_map_element("filter-disp", "cali1")
    result = table.apply()
    assert result.ok and result.stats.sets_created == 0 and result.stats.maps_created == 0
    kinds = [(next(iter(c)), next(iter(c.values())).get("element", {}).get("name")) for c in
             nft.transactions()[-1][1:]]  # fmt: skip
    assert kinds == [
        ("delete", "cali40s"),
        ("add", "cali40s"),
        ("delete", "filter-disp"),
        ("add", "filter-disp"),
    ]


def test_unknown_set_or_map_raises() -> None:
    table, _ = make()
    with pytest.raises(KeyError):
        table.add_set_members("nope", ["10.0.0.1"])
    with pytest.raises(KeyError):
        table.set_map_element("nope", "x", ("goto", "y"))
