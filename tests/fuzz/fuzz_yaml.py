#!/usr/bin/env python3
"""Fuzz ``calico.api.load_documents`` with random and mutated YAML/JSON.

Only the documented ``APIError`` subclasses may escape the loader; anything else (and any
resource that does not survive load -> dump -> load unchanged) is a bug. Exit status is 1 if
one was found, 0 otherwise.

    .venv/bin/python tests/fuzz/fuzz_yaml.py --seconds 60 [--seed N]

Seeds are the manifests under ``tests/unit/api/manifests``. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from calico.api import APIError, dump_resources, kinds, load_documents  # noqa: E402

MANIFESTS = ROOT / "tests" / "unit" / "api" / "manifests"
TOKENS = [
    "",
    ":",
    "-",
    "- ",
    "---\n",
    "[",
    "]",
    "{",
    "}",
    "'",
    '"',
    "\n",
    "\n  ",
    "\t",
    "#",
    "&a ",
    "*a",
    "!!str ",
    "!!binary ",
    "? ",
    "|",
    ">",
    "~",
    "null",
    "true",
    "0",
    "-1",
    "1e309",
    ".nan",
    "0x10",
    "ü",
    "\x00",
    "%YAML 1.1\n",
    "<<: *a\n",
    "9" * 30,
]
VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1,
    255,
    256,
    65535,
    65536,
    2**64,
    1.5,
    float("inf"),
    "",
    "x",
    "TCP",
    "tcp",
    "10.0.0.0/8",
    "10.0.0.1/8",
    "fd00::/64",
    "all()",
    "has(",
    "global()",
    "a:b",
    "1:2",
    "Ingress",
    "Egress",
    "Allow",
    "Pass",
    [],
    {},
    [1, "a"],
    {"foo": "bar"},
]


def seed_documents() -> list[str]:
    texts = [p.read_text() for p in sorted(MANIFESTS.glob("*.yaml"))]
    docs = [d for t in texts for d in t.split("\n---\n") if d.strip()]
    return docs or ["apiVersion: projectcalico.org/v3\nkind: Tier\nmetadata: {name: t}\n"]


def mutate_text(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(1, 6)):
        pos = rng.randint(0, len(text))
        op = rng.random()
        if op < 0.4:
            text = text[:pos] + rng.choice(TOKENS) + text[pos:]
        elif op < 0.7:
            text = text[:pos] + text[pos + rng.randint(1, 8) :]
        elif op < 0.85:
            lines = text.splitlines(keepends=True)
            if lines:
                i = rng.randrange(len(lines))
                lines.insert(rng.randrange(len(lines) + 1), lines[i])
                text = "".join(lines)
        else:
            text = text[:pos] + chr(rng.randint(0, 0x2FF)) + text[pos + 1 :]
    return text


def mutate_tree(rng: random.Random, node: Any, depth: int = 0) -> Any:
    """Replace, drop or add one thing somewhere in a decoded document."""
    if isinstance(node, dict) and node and rng.random() < 0.8:
        key = rng.choice(list(node))
        op = rng.random()
        if op < 0.15:
            del node[key]
        elif op < 0.3:
            node[rng.choice(["foo", "Spec", "notICMP", "types", "items", key + "x"])] = rng.choice(
                VALUES
            )
        elif op < 0.5 or depth > 6:
            node[key] = copy.deepcopy(rng.choice(VALUES))
        else:
            node[key] = mutate_tree(rng, node[key], depth + 1)
        return node
    if isinstance(node, list) and node and rng.random() < 0.8:
        i = rng.randrange(len(node))
        node[i] = mutate_tree(rng, node[i], depth + 1) if rng.random() < 0.6 else rng.choice(VALUES)
        return node
    return copy.deepcopy(rng.choice(VALUES))


def random_document(rng: random.Random) -> str:
    kind = rng.choice([*kinds(), "List", "NetworkPolicyList", "Nope"])
    doc = {"apiVersion": rng.choice(["projectcalico.org/v3", "v1", None]), "kind": kind}
    doc["metadata"] = rng.choice([{"name": "n"}, {"name": "n", "namespace": "ns"}, None, "x"])
    doc["spec"] = mutate_tree(rng, {"a": 1})
    return json.dumps(doc, default=str) if rng.random() < 0.5 else yaml.safe_dump(doc)


def one_case(rng: random.Random, seeds: list[str]) -> str:
    choice = rng.random()
    seed = rng.choice(seeds)
    if choice < 0.45:
        return mutate_text(rng, seed)
    if choice < 0.85:
        try:
            tree = yaml.safe_load(seed)
        except yaml.YAMLError:
            return seed
        tree = mutate_tree(rng, tree)
        if rng.random() < 0.5:
            return json.dumps(tree, default=str)
        return yaml.safe_dump(tree, allow_unicode=rng.random() < 0.5)
    if choice < 0.95:
        return random_document(rng)
    return "".join(chr(rng.randint(1, 0x7F)) for _ in range(rng.randint(0, 200)))


def check(text: str) -> str | None:
    """None if the loader behaved; otherwise a description of the bug."""
    try:
        loaded = load_documents(text, source="fuzz")
    except APIError:
        return None
    except Exception:
        return "unexpected exception:\n" + traceback.format_exc()
    for fmt in ("yaml", "json"):
        try:
            again = load_documents(dump_resources(loaded, fmt))  # type: ignore[arg-type]
        except Exception:
            return f"dumped {fmt} does not load again:\n" + traceback.format_exc()
        if again != loaded:
            return f"{fmt} round trip changed the resources"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--max-failures", type=int, default=5)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    seeds = seed_documents()
    deadline = time.monotonic() + args.seconds
    cases = failures = 0
    while time.monotonic() < deadline and failures < args.max_failures:
        text = one_case(rng, seeds)
        cases += 1
        problem = check(text)
        if problem:
            failures += 1
            print(f"--- failure {failures} (seed {seed}, case {cases}) ---\n{text!r}\n{problem}")
    print(f"fuzz_yaml: {cases} cases, {failures} failures, seed {seed}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
