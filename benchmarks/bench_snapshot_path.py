"""Pieces of a Felix snapshot's per-endpoint path, each against its reference in the same run
(issue 23; design/performance.md "Full-Felix scale: the snapshot path").

Run as ``python benchmarks/bench_snapshot_path.py [--n N] [--rounds R]``. CPU time
(``process_time``), best of the rounds, fast and reference alternating, since load moves
wall-clock time by 2x here; both sides' outputs are checked equal first.

* ``ipset_member_element_us``: microseconds per IP_AND_PORT member turned into its table
  element (``member_element``). Baseline: the ``ipaddress`` round trip it used before
  (``net_text(parse_net(addr))``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_felix_scale as scale
from harness import emit

from calico.felix.dataplane.managers.ipsets import member_element
from calico.felix.dataplane.managers.overlap import net_text, parse_net
from calico.felix.messages import IPSetType

BENCH = "snapshot_path"


def alternate(
    fast: Callable[[], float], ref: Callable[[], float], rounds: int
) -> tuple[float, float]:
    best_fast = best_ref = float("inf")
    for _ in range(rounds):
        best_fast = min(best_fast, fast())
        best_ref = min(best_ref, ref())
    return best_fast, best_ref


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50000, help="endpoints per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    members = [f"{scale.wep_ip(i)},tcp:8080" for i in range(args.n)]
    kind = IPSetType.IP_AND_PORT

    def reference(m: str) -> tuple[str, str, int]:
        addr, _, proto_port = m.partition(",")
        proto, _, port = proto_port.partition(":")
        return (net_text(parse_net(addr)), proto.lower(), int(port))

    if [member_element(kind, m) for m in members] != [reference(m) for m in members]:
        raise AssertionError("member_element differs from the ipaddress reference")

    def timed(fn: Callable[[str], Any]) -> Callable[[], float]:
        def run() -> float:
            t0 = time.process_time()
            for m in members:
                fn(m)
            return time.process_time() - t0

        return run

    fast_s, ref_s = alternate(
        timed(lambda m: member_element(kind, m)), timed(reference), args.rounds
    )
    emit(BENCH, "ipset_member_element_us", fast_s / args.n * 1e6, ref_s / args.n * 1e6,
         members=args.n, rounds=args.rounds,
         baseline_is="net_text(parse_net(addr)) (ipaddress), alternating")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
