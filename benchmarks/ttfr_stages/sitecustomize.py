"""TTFR stage stamps for ``bench_felix.py --stages`` (diagnostic; never imported by calico).

``bench_felix.py --stages`` puts this directory on the Felix child's ``PYTHONPATH`` with
``TTFR_STAGES_DIR`` set, so Python imports this module at start-up. In a Felix process it wraps
the methods at the stage boundaries of a new workload's path (watch delivery, syncer to calc
graph, calc graph apply, calc graph to dataplane, dataplane apply, nftables apply, route apply)
and appends ``<stage> <start> <end> <cpu>`` lines, in CLOCK_MONOTONIC seconds
(``time.perf_counter``, comparable across processes on Linux) and the calling thread's CPU
seconds over the span (``time.thread_time``: wall minus CPU is waiting, for the GIL or a core),
to ``$TTFR_STAGES_DIR/felix.<pid>``, a ``thread <native id> <name>`` line as each thread
starts, so the bench can name the per-thread CPU it reads from ``/proc``, and a ``gc <start>
<end> <generation> <cpu>`` line for each collection, so it can tell whether the slow workloads
waited for the collector. Anything else (the bench, probe helpers) is left untouched.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import threading
import time
from typing import Any

STAGES = (
    ("calico.datastore.local.watch", "LocalWatch", "deliver", "deliver"),
    ("calico.syncer.watchersyncer", "_WatcherCache", "_apply", "convert"),
    ("calico.syncer.watchersyncer", "WatcherSyncer", "_deliver", "dispatch"),
    ("calico.felix.calc.async_calc_graph", "AsyncCalcGraph", "on_updates", "syncer_to_calc"),
    ("calico.felix.calc.async_calc_graph", "AsyncCalcGraph", "_apply_updates", "calc_apply"),
    ("calico.felix.dataplane.loop", "InternalDataplane", "on_messages", "to_dataplane"),
    ("calico.felix.dataplane.loop", "InternalDataplane", "_apply", "dp_apply"),
    (
        "calico.felix.dataplane.managers.endpoints",
        "EndpointManager",
        "complete_deferred_work",
        "ep_render",
    ),
    ("calico.felix.nftables.table", "NftablesTable", "apply", "nft_apply"),
    ("calico.felix.nftables.netlink", "NetlinkElements", "send", "nft_send"),
    ("calico.felix.routetable.table", "RouteTable", "apply", "route_apply"),
    ("calico.felix.dataplane.loop", "InternalDataplane", "_publish_status", "status"),
)


def _install(out_dir: str) -> None:
    lock = threading.Lock()
    out = open(os.path.join(out_dir, f"felix.{os.getpid()}"), "a", buffering=1)  # noqa: SIM115

    def wrap(module: str, cls: str, method: str, stage: str) -> None:
        owner = getattr(importlib.import_module(module), cls)
        original = getattr(owner, method)

        def stamped(self: Any, *args: Any, **kwargs: Any) -> Any:
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return original(self, *args, **kwargs)
            finally:
                end, cpu = time.perf_counter(), time.thread_time() - cpu
                with lock:
                    out.write(f"{stage} {start:.6f} {end:.6f} {cpu:.6f}\n")

        setattr(owner, method, stamped)

    for stage in STAGES:
        wrap(*stage)

    bootstrap = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def named(self: threading.Thread) -> None:
        with lock:
            out.write(f"thread {threading.get_native_id()} {self.name.replace(' ', '_')}\n")
        bootstrap(self)

    threading.Thread._bootstrap_inner = named  # type: ignore[attr-defined]

    started: list[float] = []

    def collected(phase: str, info: dict[str, Any]) -> None:
        # Every collection, as a ``gc <start> <end> <generation> <cpu>`` line: is one in the
        # tail? (Wall includes any preemption while the collector held the GIL; cpu does not.)
        if phase == "start":
            started[:] = [time.perf_counter(), time.thread_time()]
        elif started:
            start, cpu = started
            end, cpu = time.perf_counter(), time.thread_time() - cpu
            with lock:
                out.write(f"gc {start:.6f} {end:.6f} {info['generation']} {cpu:.6f}\n")

    gc.callbacks.append(collected)


if os.environ.get("TTFR_STAGES_DIR") and "felix" in sys.argv[1:3]:
    _install(os.environ["TTFR_STAGES_DIR"])
