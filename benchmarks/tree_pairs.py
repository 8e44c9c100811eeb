"""Running a child process per source tree, alternating: the start-up benchmarks'
(``bench_felix_imports.py``, ``bench_felix_startup_read.py``) shared runner. Its own module
name, not ``harness``: the test suite imports another module of that name first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any


def run_tree_child(code: str, args: Sequence[str], tree: str, cwd: str) -> dict[str, Any]:
    """``python -c code *args`` in a fresh process with ``tree`` as its ``PYTHONPATH``, run as
    an installed package runs (bytecode caches may be written); its stdout, parsed as JSON."""
    env = dict(os.environ, PYTHONPATH=tree)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def alternate_trees(
    trees: dict[str, str],
    rounds: int,
    run: Callable[[str], dict[str, Any]],
    show: Callable[[int, str, dict[str, Any]], None],
) -> tuple[dict[str, list[float]], dict[str, dict[str, Any]]]:
    """One warm-up ``run(tree)`` per tree (page cache, code caches), then ``rounds`` rounds of
    one run per tree, the order reversed every other round so drift in the machine's load
    falls on both; ``show`` sees each result. Returns each tree's ``cpu_s`` values and its
    last result."""
    cpu: dict[str, list[float]] = {name: [] for name in trees}
    last: dict[str, dict[str, Any]] = {}
    for tree in trees.values():
        run(tree)
    for rnd in range(rounds):
        order = list(trees.items()) if rnd % 2 == 0 else list(trees.items())[::-1]
        for name, tree in order:
            got = run(tree)
            cpu[name].append(got["cpu_s"])
            last[name] = got
            show(rnd, name, got)
    return cpu, last
