"""Label index benchmarks: optimised indexes vs their linear-scan oracles (the baseline).

Run as ``python benchmarks/bench_labelindex.py``. Workload: 10,000 workload endpoints (one IPv4
each, two named ports, in one of 100 namespaces whose labels arrive via profiles), 200 network
sets, 500 distinct policy-style selectors (a few of them unindexable, e.g. ``!has(x)``).
Prints JSON lines via ``harness.emit`` (value = optimised, baseline = linear, ratio < 1 means the
optimised index is faster) and a human-readable speed-up summary at the end:

* ``selector_index`` / ``named_port_index`` ``cold_build_s``: parents, then selectors / IP sets,
  then every endpoint and network set.
* ``..._cold_build_items_first_s``: the same with endpoints first and selectors last (each new
  selector scans the existing endpoints).
* ``..._label_change_us``: mean latency of one endpoint label change (its ``app`` label moves to
  another value) on the fully built index.
* ``..._parent_change_us``: mean latency of one namespace (profile) label change, which touches
  that namespace's ~100 endpoints.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(_ROOT))
sys.path.insert(0, str(_ROOT.parent))

from harness import emit  # noqa: E402

from calico.felix.labelindex import (  # noqa: E402
    LinearSelectorAndNamedPortIndex,
    LinearSelectorIndex,
    NamedPort,
    SelectorAndNamedPortIndex,
    SelectorIndex,
)
from calico.selector import Selector, parse_uncached  # noqa: E402

N_ENDPOINTS = 10_000
N_NETSETS = 200
N_SELECTORS = 500
N_NAMESPACES = 100
N_APPS = 400
N_LABEL_CHANGES = 200
N_PARENT_CHANGES = 20
NS_LABEL = "projectcalico.org/namespace"

Endpoint = tuple[str, dict[str, str], list[str], list[NamedPort], list[str]]


def make_workload(rnd: random.Random) -> tuple[dict[str, dict[str, str]], list[Endpoint]]:
    """Namespaces (profiles) and endpoints + network sets, as update_endpoint_or_set args."""
    parents = {
        f"kns.ns{n}": {NS_LABEL: f"ns{n}", "env": rnd.choice(["prod", "dev", "test"])}
        for n in range(N_NAMESPACES)
    }
    items: list[Endpoint] = []
    for i in range(N_ENDPOINTS):
        labels = {
            "app": f"app{rnd.randrange(N_APPS)}",
            "tier": rnd.choice(["web", "api", "db", "cache", "queue"]),
            "version": f"v{rnd.randrange(5)}",
        }
        if rnd.random() < 0.3:
            labels["canary"] = "true"
        ip = f"10.{i // 65536}.{(i // 256) % 256}.{i % 256}"
        ports = [NamedPort("http", "TCP", 8080), NamedPort("metrics", "TCP", 9090 + i % 3)]
        items.append((f"wep{i}", labels, [ip], ports, [f"kns.ns{rnd.randrange(N_NAMESPACES)}"]))
    for i in range(N_NETSETS):
        labels = {"netset": f"set{i}", "zone": rnd.choice(["internet", "corp", "partner"])}
        nets = [f"172.{16 + i % 16}.{i}.0/24", "0.0.0.0/0"] if i == 0 else [f"192.168.{i}.0/24"]
        items.append((f"netset{i}", labels, nets, [], []))
    return parents, items


def make_selectors(rnd: random.Random) -> list[Selector]:
    """``N_SELECTORS`` distinct selectors in the shapes policies use."""

    def app() -> str:
        return f'app == "app{rnd.randrange(N_APPS)}"'

    def ns() -> str:
        return f'{NS_LABEL} == "ns{rnd.randrange(N_NAMESPACES)}"'

    def netset() -> str:
        return f'netset == "set{rnd.randrange(N_NETSETS)}"'

    shapes: list[Callable[[], str]] = [
        app,
        ns,
        netset,
        lambda: f"{app()} && {ns()}",
        lambda: f'tier in {{"web", "api"}} && {app()}',
        lambda: f'zone == "internet" && !({netset()})',
        lambda: f"has(canary) && {app()}",
        lambda: f'env == "prod" && tier == "db" && version != "v{rnd.randrange(5)}"',
    ]
    texts: set[str] = {"!has(canary)", 'tier != "db"', "all()"}  # unindexable ones
    while len(texts) < N_SELECTORS:
        texts.add(rnd.choice(shapes)())
    return [parse_uncached(t) for t in sorted(texts)]


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _build_selector_index(index, parents, items, selectors, items_first: bool = False) -> None:
    for pid, labels in parents.items():
        index.update_parent_labels(pid, labels)
    if not items_first:
        for i, sel in enumerate(selectors):
            index.update_selector(i, sel)
    for item_id, labels, _nets, _ports, pids in items:
        index.update_labels(item_id, labels, pids)
    if items_first:
        for i, sel in enumerate(selectors):
            index.update_selector(i, sel)


def _build_ip_set_index(index, parents, items, set_defs, items_first: bool = False) -> None:
    for pid, labels in parents.items():
        index.update_parent_labels(pid, labels)
    if not items_first:
        for set_def in set_defs:
            index.update_ip_set(*set_def)
    for item in items:
        index.update_endpoint_or_set(*item)
    if items_first:
        for set_def in set_defs:
            index.update_ip_set(*set_def)


def bench_selector_index(parents, items, selectors) -> list[dict]:
    timings: dict[str, dict[str, float]] = {}
    for name, cls in (("optimised", SelectorIndex), ("linear", LinearSelectorIndex)):
        t = timings[name] = {}
        index = cls()
        t["build"] = _timed(partial(_build_selector_index, index, parents, items, selectors))
        cold = cls()
        t["build_items_first"] = _timed(
            partial(_build_selector_index, cold, parents, items, selectors, items_first=True)
        )
        assert cold.matches() == index.matches()
        t["label"], t["parent"] = _changes(items, index.update_labels, index.update_parent_labels)
    return _emit_all("selector_index", timings)


def bench_named_port_index(parents, items, selectors) -> list[dict]:
    # Every tenth set is a named-port set: "http" (any protocol) or "metrics" (tcp).
    set_defs = []
    for i, sel in enumerate(selectors):
        proto, port = ("tcp", "metrics") if i % 20 == 0 else ("any", "http")
        set_defs.append((f"s{i}", sel, *((proto, port) if i % 10 == 0 else (None, None))))
    by_id = {item[0]: item for item in items}
    timings: dict[str, dict[str, float]] = {}
    impls = (("optimised", SelectorAndNamedPortIndex), ("linear", LinearSelectorAndNamedPortIndex))
    for name, cls in impls:
        t = timings[name] = {}
        events: list[tuple[str, str]] = []
        index = cls(lambda s, m, events=events: events.append((s, m)))
        t["build"] = _timed(partial(_build_ip_set_index, index, parents, items, set_defs))
        t["members"] = len(events)
        cold = cls()
        t["build_items_first"] = _timed(
            partial(_build_ip_set_index, cold, parents, items, set_defs, items_first=True)
        )

        def update_item(iid, labels, pids, index=index) -> None:
            index.update_endpoint_or_set(iid, labels, by_id[iid][2], by_id[iid][3], pids)

        t["label"], t["parent"] = _changes(items, update_item, index.update_parent_labels)
    assert timings["optimised"]["members"] == timings["linear"]["members"]
    print(f"# named_port_index: {timings['optimised']['members']} members", file=sys.stderr)
    return _emit_all("named_port_index", timings)


def _changes(items, update_item, update_parent) -> tuple[float, float]:
    """Mean seconds per endpoint label change and per namespace label change (fixed seed, so
    both implementations see the same sequence)."""
    seq = random.Random(7)
    endpoints = [item for item in items if item[0].startswith("wep")]
    start = time.perf_counter()
    for _ in range(N_LABEL_CHANGES):
        item_id, labels, _nets, _ports, pids = seq.choice(endpoints)
        update_item(item_id, {**labels, "app": f"app{seq.randrange(N_APPS)}"}, pids)
    per_label = (time.perf_counter() - start) / N_LABEL_CHANGES
    start = time.perf_counter()
    for n in range(N_PARENT_CHANGES):
        ns = seq.randrange(N_NAMESPACES)
        update_parent(f"kns.ns{ns}", {NS_LABEL: f"ns{ns}", "env": ["prod", "dev", "test"][n % 3]})
    per_parent = (time.perf_counter() - start) / N_PARENT_CHANGES
    return per_label, per_parent


def _emit_all(bench: str, timings: dict[str, dict[str, float]]) -> list[dict]:
    metrics = [
        ("cold_build_s", "build", 1.0),
        ("cold_build_items_first_s", "build_items_first", 1.0),
        ("label_change_us", "label", 1e6),
        ("parent_change_us", "parent", 1e6),
    ]
    return [
        emit(
            bench,
            metric,
            timings["optimised"][key] * scale,
            timings["linear"][key] * scale,
            endpoints=N_ENDPOINTS,
            netsets=N_NETSETS,
            selectors=N_SELECTORS,
        )
        for metric, key, scale in metrics
    ]


def main() -> None:
    rnd = random.Random(42)
    parents, items = make_workload(rnd)
    selectors = make_selectors(rnd)
    results = bench_selector_index(parents, items, selectors)
    results += bench_named_port_index(parents, items, selectors)
    print("# speed-up of optimised over linear (baseline / value):", file=sys.stderr)
    for r in results:
        speedup = r["baseline"] / r["value"]
        print(f"#   {r['bench']:18} {r['metric']:26} {speedup:8.1f}x", file=sys.stderr)


if __name__ == "__main__":
    main()
