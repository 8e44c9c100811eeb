"""Fuzz the selector parser: arbitrary text may only ever raise SelectorParseError.

Run as ``python tests/fuzz/fuzz_selector.py [--seconds N] [--seed S]``. Not collected by pytest.
Inputs are built from a mix of selector fragments and random characters so that most reach deep
into the parser rather than failing on the first character. Every input that parses is also
canonicalised, re-parsed, hashed, restricted and evaluated (compiled and interpreted, which must
agree) so crashes anywhere in the pipeline are caught.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from calico.selector import SelectorParseError, parse_uncached

FRAGMENTS = [
    "a",
    "b",
    "x.y/z-w_1",
    " ",
    "  ",
    "\t",
    "\n",
    "==",
    "!=",
    "=",
    "!",
    "&&",
    "||",
    "&",
    "|",
    "(",
    ")",
    "{",
    "}",
    ",",
    '"',
    "'",
    '"v"',
    "'v'",
    '""',
    "in",
    "not in",
    "notin",
    "not",
    "contains",
    "starts with",
    "startswith",
    "ends with",
    "endswith",
    "has(",
    "has(a)",
    "all()",
    "all(",
    "global()",
    "global(",
    "é",
    "\x00",
    "%",
    "a" * 513,
    "\ud800",
]
LABELS = [{}, {"a": "v"}, {"a": ""}, {"b": "v", "x.y/z-w_1": "v"}, {"a": "x", "b": "y"}]


def random_input(rnd: random.Random) -> str:
    """A selector-ish or fully random string."""
    if rnd.random() < 0.15:
        return "".join(chr(rnd.randrange(0, 0x2FF)) for _ in range(rnd.randrange(0, 40)))
    return "".join(rnd.choice(FRAGMENTS) for _ in range(rnd.randrange(0, 25)))


def check(text: str) -> bool:
    """Exercise the whole pipeline on ``text``; True if it parsed."""
    try:
        sel = parse_uncached(text)
    except SelectorParseError as err:
        assert 0 <= err.position <= len(text), err
        return False
    again = parse_uncached(sel.canonical)
    assert again.canonical == parse_uncached(again.canonical).canonical
    assert sel.unique_id.startswith("s:")
    restrictions = sel.label_restrictions
    for labels in LABELS:
        result = sel.evaluate_interpreted(labels)
        assert sel.compiled(labels) is result, (labels, result)
        assert again.evaluate_interpreted(labels) is result
        if result:
            assert all(r.allows(labels, name) for name, r in restrictions.items())
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rnd = random.Random(seed)
    deadline = time.monotonic() + args.seconds
    runs = parsed = 0
    while time.monotonic() < deadline:
        for _ in range(200):
            text = random_input(rnd)
            runs += 1
            try:
                parsed += check(text)
            except Exception:
                print(f"FAIL (seed {seed}) on input {text!r}", file=sys.stderr)
                traceback.print_exc()
                return 1
    print(f"ok: {runs} inputs, {parsed} parsed, seed {seed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
