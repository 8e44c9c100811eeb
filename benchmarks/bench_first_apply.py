"""Felix's first apply at scale, offline: plan, batch, encode and send one table's whole
first transaction, stage by stage, in a private network namespace.

Run as ``python benchmarks/bench_first_apply.py --desired FILE`` (root: ``unshare``) with
``FILE`` the desired state the real Felix held at its first apply (``desired.pickle``,
written by ``benchmarks/felix_firstapply/sitecustomize.py`` with ``FIRSTAPPLY_DIR`` set,
e.g. under ``bench_felix_scale.py --no-baseline --remote 250000``), or ``--synthetic N`` for
N remote addresses over 100 interval sets. Each round starts from no table, as a cold Felix
does: ``build_plan`` (fresh known state, everything dirty), ``plan_batch``, the batch's
``encode`` and the send (the kernel's work runs in this thread's ``sendmsg``), then the
table is deleted. Figures are this thread's CPU per stage (min / median / max over rounds)
and the whole apply's wall time. Only APIs main already has are used, so the same script
measures another tree (``PYTHONPATH``) for alternating comparisons.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import pickle
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import emit

BENCH = "first_apply"
CLONE_NEWNET = 0x40000000


def synthetic(remote: int) -> tuple[str, str, Any]:
    from calico.felix.nftables.model import NftSet, ipset_name
    from calico.felix.nftables.table import NftablesTable

    t = NftablesTable("calico", nft=object(), netlink=None)  # type: ignore[arg-type]
    per_set = max(remote // 100, 5)
    for i in range(100):
        base = (10 << 24) + i * 65536 * 4
        members = {socket.inet_ntoa((base + j).to_bytes(4, "big")) for j in range(per_set)}
        t.set_set(NftSet(ipset_name(f"s{i}", 4), "ipv4_addr", True, members))
        ports = {(m, 6, 8080) for m in list(members)[:50]}
        typ = ("ipv4_addr", "inet_proto", "inet_service")
        t.set_set(NftSet(ipset_name(f"n{i}", 4), typ, False, ports))
    return "inet", "calico", t._desired


def stats(xs: list[float]) -> list[float]:
    return [round(min(xs), 4), round(statistics.median(xs), 4), round(max(xs), 4)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--desired", type=Path, help="desired.pickle from felix_firstapply")
    ap.add_argument("--synthetic", type=int, default=250_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNET) != 0:
        print(f"unshare: {os.strerror(ctypes.get_errno())} (needs root)", file=sys.stderr)
        return 1
    import nftables

    from calico.felix.nftables.netlink import NetlinkElements
    from calico.felix.nftables.nlbatch import plan_batch
    from calico.felix.nftables.state import KernelState
    from calico.felix.nftables.transaction import Dirty, build_plan

    if args.desired is not None:
        with args.desired.open("rb") as f:
            family, name, desired = pickle.load(f)
    else:
        family, name, desired = synthetic(args.synthetic)
    nft, conn = nftables.Nftables(), NetlinkElements(timeout=60.0)
    stages: dict[str, list[float]] = {k: [] for k in ("plan", "batch", "encode", "send", "all")}
    wall: list[float] = []
    shape: dict[str, int] = {}
    for _ in range(args.rounds):
        known, dirty = KernelState(), Dirty()
        dirty.mark_all(desired, known)
        t0, w0 = time.thread_time(), time.perf_counter()
        plan = build_plan(family, name, desired, known, dirty)
        t1 = time.thread_time()
        batch = plan_batch(family, name, plan)
        t2 = time.thread_time()
        batch.encode(1)  # what send() does first, timed on its own
        t3 = time.thread_time()
        error = conn.send(batch)
        t4, w4 = time.thread_time(), time.perf_counter()
        if error is not None:
            raise SystemExit(f"the first apply failed: {error}")
        for k, v in (("plan", t1 - t0), ("batch", t2 - t1), ("encode", t3 - t2)):
            stages[k].append(v)
        stages["send"].append(t4 - t3)
        stages["all"].append(t4 - t0 - (t3 - t2))  # encode runs again inside send
        wall.append(w4 - w0 - (t3 - t2))
        shape = {
            "commands": len(plan.commands),
            "messages": len(batch.messages),
            "members": sum(len(s.elements) for s in desired.sets.values()),
            "sets": len(desired.sets),
            "chains": len(desired.chains),
        }
        rc, _out, err = nft.cmd(f"delete table {family} {name}")
        if rc != 0:
            raise SystemExit(f"deleting the table: {err}")
    emit(
        BENCH,
        "first_apply_cpu_s",
        statistics.median(stages["all"]),
        0.0,
        rounds=args.rounds,
        **{f"{k}_cpu_min_median_max": stats(v) for k, v in stages.items()},
        wall_min_median_max=stats(wall),
        **shape,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
