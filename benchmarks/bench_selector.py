"""Selector benchmarks: parsing throughput and compiled vs interpreted evaluation.

Run as ``python benchmarks/bench_selector.py``. Prints JSON lines via ``harness.emit``:

* ``selector_parse``: distinct selectors parsed per second (value) vs tokenized per second
  (baseline, same inputs, same run) -- the ratio is the share of time spent outside the lexer.
* ``selector_eval``: evaluations per second of the compiled evaluator (value) vs the tree-walking
  interpreter (baseline) over the same 1,000,000 label sets. Targets: value >= 1e6/s, ratio >= 5.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(_ROOT))
sys.path.insert(0, str(_ROOT.parent))

from harness import best_of, emit  # noqa: E402

from calico.selector import parse_uncached  # noqa: E402
from calico.selector.tokenizer import tokenize  # noqa: E402

BENCH_SELECTOR = 'a == "b" && has(c) && d in {"x","y"}'
N_PARSE = 10_000
N_EVAL = 1_000_000
POOL = 10_000


def make_selectors(n: int, rnd: random.Random) -> list[str]:
    """``n`` distinct, realistic policy-style selectors."""
    keys = ["app", "tier", "role", "env", "projectcalico.org/namespace", "k8s-app", "version"]
    out: set[str] = set()
    while len(out) < n:
        terms = []
        for _ in range(rnd.randint(1, 5)):
            k, v = rnd.choice(keys), f"v{rnd.randrange(1000)}"
            terms.append(
                rnd.choice(
                    [
                        f"{k} == '{v}'",
                        f'{k} != "{v}"',
                        f"has({k})",
                        f"!has({k})",
                        f'{k} in {{"{v}", "w{rnd.randrange(99)}"}}',
                        f"{k} not in {{'{v}'}}",
                        f'{k} starts with "{v[:2]}"',
                    ]
                )
            )
        text = " && ".join(terms)
        if rnd.random() < 0.3:
            text = f"({text}) || {rnd.choice(keys)} == 'x{rnd.randrange(50)}'"
        out.add(text)
    return sorted(out)


def make_label_sets(n: int, rnd: random.Random) -> list[dict[str, str]]:
    """Varied label sets; roughly a quarter match the benchmark selector."""
    pool = []
    for _ in range(n):
        labels = {f"k{i}": f"v{rnd.randrange(20)}" for i in range(rnd.randint(0, 6))}
        if rnd.random() < 0.8:
            labels["a"] = rnd.choice(["b", "b", "c"])
        if rnd.random() < 0.7:
            labels["c"] = rnd.choice(["", "x"])
        if rnd.random() < 0.8:
            labels["d"] = rnd.choice(["x", "y", "z"])
        pool.append(labels)
    return pool


def bench_parse(rnd: random.Random) -> None:
    texts = make_selectors(N_PARSE, rnd)
    t_tok = best_of(lambda: [tokenize(t) for t in texts])
    t_parse = best_of(lambda: [parse_uncached(t) for t in texts])
    emit(
        "selector_parse",
        "parses_per_sec",
        N_PARSE / t_parse,
        N_PARSE / t_tok,
        baseline_is="tokenize-only rate, same inputs",
        selectors=N_PARSE,
        parse_seconds=round(t_parse, 4),
        tokenize_seconds=round(t_tok, 4),
    )


def bench_eval(rnd: random.Random) -> None:
    sel = parse_uncached(BENCH_SELECTOR)
    pool = make_label_sets(POOL, rnd)
    passes = N_EVAL // POOL
    compiled = sel.compiled
    interpreted = sel.evaluate_interpreted

    def run_compiled() -> int:
        hits = 0
        for _ in range(passes):
            for labels in pool:
                if compiled(labels):
                    hits += 1
        return hits

    def run_interpreted() -> int:
        hits = 0
        for _ in range(passes):
            for labels in pool:
                if interpreted(labels):
                    hits += 1
        return hits

    hits = run_compiled()
    assert hits == run_interpreted(), "compiled and interpreted evaluators disagree"
    t_compiled = best_of(run_compiled)
    t_interp = best_of(run_interpreted, repeat=2)
    emit(
        "selector_eval",
        "evals_per_sec",
        N_EVAL / t_compiled,
        N_EVAL / t_interp,
        baseline_is="tree-walking interpreter, same label sets",
        selector=BENCH_SELECTOR,
        evaluations=N_EVAL,
        distinct_label_sets=POOL,
        match_fraction=round(hits / N_EVAL, 3),
        compiled_seconds=round(t_compiled, 4),
        interpreted_seconds=round(t_interp, 4),
    )


def main() -> int:
    rnd = random.Random(20240601)
    bench_parse(rnd)
    bench_eval(rnd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
