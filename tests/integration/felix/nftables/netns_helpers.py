"""Run code inside a throwaway network namespace from the pytest process.

Approach: one worker thread per namespace that ``setns()``-es itself into it and then executes the
callables we submit. Network namespaces are per thread on Linux, so the rest of pytest stays in the
host namespace; libnftables handles created on the worker bind their netlink sockets there, and
subprocesses forked from it (``nft``) inherit it. Closures and exceptions cross back natively, so
assertions keep pytest's introspection. ``ip netns exec`` is used only for the ``nft`` CLI, which
plays the "someone else touched our table" role in drift tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from netns_support import NetnsWorker, in_ns, worker_netns


class Netns(NetnsWorker):
    """A named namespace plus a worker thread living in it."""

    def __init__(self, name: str) -> None:
        super().__init__(name, timeout=60)

    def nft(self, *args: str, check: bool = True) -> str:
        """The nft CLI inside the namespace (an outside actor, like an admin or kube-proxy)."""
        return in_ns(self.name, "nft", *args, check=check, timeout=30).stdout

    def listing(self, table: str = "calico") -> list[dict[str, Any]]:
        """``nft -j -a list table inet <table>`` objects (with handles), metainfo dropped."""
        out = json.loads(self.nft("-j", "-a", "list", "table", "inet", table))
        return [o for o in out["nftables"] if "metainfo" not in o]


@contextmanager
def fresh_netns(prefix: str = "calnft") -> Iterator[Netns]:
    """A new, empty network namespace; deleted afterwards even when the body fails."""
    with worker_netns(Netns, prefix, length=10, lo_up=False) as ns:
        yield ns


# ---- listing helpers -----------------------------------------------------------------------------


def rules_by_chain(objs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for o in objs:
        if "chain" in o:
            out.setdefault(o["chain"]["name"], [])
        elif "rule" in o:
            out.setdefault(o["rule"]["chain"], []).append(o["rule"])
    return out


def rule_handles(objs: list[dict[str, Any]]) -> dict[str, list[int]]:
    return {c: [r["handle"] for r in rules] for c, rules in rules_by_chain(objs).items()}


def set_elements(objs: list[dict[str, Any]], name: str) -> list[Any]:
    for o in objs:
        for kind in ("set", "map"):
            if kind in o and o[kind]["name"] == name:
                return o[kind].get("elem", [])
    raise KeyError(name)


def names_of(objs: list[dict[str, Any]], kind: str) -> set[str]:
    return {o[kind]["name"] for o in objs if kind in o}


class RecordingNft:
    """Wraps a real libnftables handle: counts round trips, can fail the next N transactions."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[dict[str, Any]] = []
        self.fail_next = 0

    def json_cmd(self, json_root: dict[str, Any]) -> tuple[int, Any, str]:
        self.calls.append(json_root)
        is_list = any("list" in c for c in json_root["nftables"])
        if self.fail_next and not is_list:
            self.fail_next -= 1
            return 1, "", "injected failure"
        return self.inner.json_cmd(json_root)

    def transactions(self) -> list[list[dict[str, Any]]]:
        return [c["nftables"] for c in self.calls if not any("list" in x for x in c["nftables"])]
