"""Loaded into Felix (via ``PYTHONPATH``) with ``FIRSTAPPLY_DIR`` set: the first
``NftablesTable.apply`` pickles the table's desired state (``desired.pickle``, for
``bench_first_apply.py --desired`` to replay offline) and runs under cProfile
(``first-apply.prof``). With ``FIRSTAPPLY_MODE=time`` it only times it instead: wall and
this thread's CPU of the apply, and the dataplane thread's CPU since it started (the
updates it drained before the apply included), in ``first-apply.json``. Why: the first
apply at 250,000 remote endpoints, profiled and timed in the real Felix fed the real calc
output (design/performance.md "First apply at 250,000 (session 8)")."""

from __future__ import annotations

import cProfile
import json
import os
import pickle
import time

_DIR = os.environ.get("FIRSTAPPLY_DIR")


def _install() -> None:
    from calico.felix.nftables import table

    original = table.NftablesTable.apply
    done: list[bool] = []

    def apply(self: table.NftablesTable) -> table.ApplyResult:
        if done:
            return original(self)
        done.append(True)
        if os.environ.get("FIRSTAPPLY_MODE") == "time":
            return _timed(self)
        start = time.perf_counter()
        with open(os.path.join(str(_DIR), "desired.pickle"), "wb") as f:
            pickle.dump((self.family, self.name, self._desired), f, pickle.HIGHEST_PROTOCOL)
        pickled = time.perf_counter() - start
        prof = cProfile.Profile()
        result = prof.runcall(original, self)
        prof.dump_stats(os.path.join(str(_DIR), "first-apply.prof"))
        with open(os.path.join(str(_DIR), "first-apply.txt"), "w") as f:
            f.write(f"pickle {pickled:.3f}s; apply {result.seconds:.3f}s; {result.stats}\n")
        return result

    def _timed(self: table.NftablesTable) -> table.ApplyResult:
        cpu, wall = time.thread_time(), time.perf_counter()
        result = original(self)
        out = {
            "apply_wall_s": round(time.perf_counter() - wall, 4),
            "apply_cpu_s": round(time.thread_time() - cpu, 4),
            "dataplane_thread_cpu_s": round(time.thread_time(), 4),
            "commands": result.commands,
            "netlink": result.netlink,
        }
        with open(os.path.join(str(_DIR), "first-apply.json"), "w") as f:
            json.dump(out, f)
        return result

    table.NftablesTable.apply = apply  # type: ignore[method-assign]


if _DIR:
    _install()
