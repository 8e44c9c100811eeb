"""Run code inside a throwaway network namespace from the pytest process.

Approach: one worker thread per namespace that ``setns()``-es itself into it and then executes the
callables we submit. Network namespaces are per thread on Linux, so the rest of pytest stays in the
host namespace; libnftables handles created on the worker bind their netlink sockets there, and
subprocesses forked from it (``nft``) inherit it. Closures and exceptions cross back natively, so
assertions keep pytest's introspection. ``ip netns exec`` is used only for the ``nft`` CLI, which
plays the "someone else touched our table" role in drift tests.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

CLONE_NEWNET = 0x40000000
T = TypeVar("T")

_libc = ctypes.CDLL(None, use_errno=True)


def _enter_netns(name: str) -> None:
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({name}): {os.strerror(err)}")
    finally:
        os.close(fd)


class Netns:
    """A named namespace plus a worker thread living in it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._pool = ThreadPoolExecutor(
            max_workers=1,
            thread_name_prefix=f"netns-{name}",
            initializer=_enter_netns,
            initargs=(name,),
        )

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` on the namespace's worker thread and return (or raise) its outcome."""
        return self._pool.submit(fn, *args, **kwargs).result(timeout=60)

    def nft(self, *args: str, check: bool = True) -> str:
        """The nft CLI inside the namespace (an outside actor, like an admin or kube-proxy)."""
        proc = subprocess.run(
            ["ip", "netns", "exec", self.name, "nft", *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"nft {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def listing(self, table: str = "calico") -> list[dict[str, Any]]:
        """``nft -j -a list table inet <table>`` objects (with handles), metainfo dropped."""
        out = json.loads(self.nft("-j", "-a", "list", "table", "inet", table))
        return [o for o in out["nftables"] if "metainfo" not in o]

    def close(self) -> None:
        self._pool.shutdown(wait=True)


@contextmanager
def fresh_netns(prefix: str = "calnft") -> Iterator[Netns]:
    """A new, empty network namespace; deleted afterwards even when the body fails."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    ns = Netns(name)
    try:
        yield ns
    finally:
        try:
            ns.close()
        finally:
            subprocess.run(["ip", "netns", "delete", name], check=False, capture_output=True)


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
