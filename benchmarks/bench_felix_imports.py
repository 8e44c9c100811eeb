"""Felix's start-up imports alone: CPU of importing what an nftables-mode Felix start imports
before its first apply, in a fresh process, for an older tree and this one, alternating.

Usage: ``bench_felix_imports.py OLD_TREE [--rounds N]`` (OLD_TREE: a ``git archive`` copy of
an older commit). Each child runs with ``PYTHONPATH`` set to one tree and its working directory
outside both, installs the code cache and pauses the collector as ``calico.cli.main`` does,
imports ``MODULES`` and reports its CPU (``time.process_time``), the modules loaded and the
pydantic model classes defined. A whole Felix start varies by 0.3-0.5 s under load; this
figure isolates the imports (design/performance.md "Cold start: the kinds Felix never reads").
One JSON line per child, then min / median / max per tree and a same-run ratio.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = "felix_imports"
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tree_pairs import alternate_trees, run_tree_child  # noqa: E402  (benchmarks/tree_pairs.py)

#: What a real ``calico component felix`` start (nftables mode, metrics off) imports before its
#: first apply, at the top of its import tree (``PYTHONPROFILEIMPORTTIME=1`` of a real start);
#: their own imports come with them.
MODULES = (
    "calico.cli.root",
    "calico.felix.daemon",
    "calico.felix.startup_config",
    "calico.datastore.factory",
    "calico.datastore.local",
    "calico.felix.dataplane.build",
    "calico.felix.calc.calc_graph",
    "calico.felix.status",
    "calico.syncer.definitions",
    "calico.felix.ifacemonitor",
    "calico.felix.bpf.off",
    "calico.health.server",
    "calico.model.processors.config",
    "calico.model.processors.endpoints",
    "calico.model.processors.ipam",
    "calico.model.processors.policy",
    "calico.model.processors.rules",
    "calico.model.processors.lean",
    "calico.model.processors.leanpolicy",  # session 7; absent from older trees (skipped there)
    "calico.model.processors.leanconfig",
    "calico.model.processors.leanpool",
    "calico.model.processors.leanfelixconfig",  # session 8 (skipped in older trees)
    "calico.model.processors.leannode",
    "calico.model.processors.leanprofile",
    # Session 8: a clean start no longer imports the model modules (calico.api.cluster, .ipam,
    # .felixconfig): an older tree imports them through the modules above.
    "calico.felix.routetable.rtnl",
)

CHILD = """
import sys, time
t0 = time.process_time()
from calico.codecache import install
install()
from calico.gcpause import pause
pause()
import importlib
for name in sys.argv[1].split(","):
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:  # a module this (older) tree does not have
        if exc.name != name:
            raise
cpu = time.process_time() - t0
had_pydantic = "pydantic" in sys.modules
from pydantic import BaseModel
def count(cls):
    return sum(1 + count(c) for c in cls.__subclasses__())
import json
print(json.dumps({"cpu_s": cpu, "modules": len(sys.modules), "models": count(BaseModel),
                  "pydantic": had_pydantic,
                  "calico_file": sys.modules["calico"].__file__}))
"""


def child(tree: str | None, cwd: str) -> dict[str, Any]:
    return run_tree_child(CHILD, [",".join(MODULES)], tree or str(ROOT), cwd)


def main() -> int:
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    old = str(Path(args[0]).resolve())
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 9
    subprocess.run([sys.executable, "-m", "compileall", "-q", old + "/calico"], check=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "calico")], check=True)
    trees = {"old": old, "new": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="bench-felix-imports-") as cwd:
        cpu, last = alternate_trees(
            trees,
            rounds,
            lambda tree: child(tree, cwd),
            lambda rnd, name, got: print(
                json.dumps({"round": rnd, "tree": name, **got}), flush=True
            ),
        )
    new, base = statistics.median(cpu["new"]), statistics.median(cpu["old"])
    print(
        json.dumps(
            {
                "bench": BENCH,
                "metric": "startup_imports_cpu_s",
                "value": round(new, 4),
                "baseline": round(base, 4),
                "ratio": round(new / base, 4),
                "rounds": rounds,
                "baseline_is": f"the tree in {old}, alternating with this one",
                **{
                    f"{t}_cpu": {
                        "min": round(min(v), 4),
                        "median": round(statistics.median(v), 4),
                        "max": round(max(v), 4),
                    }
                    for t, v in cpu.items()
                },
                **{f"{t}_modules": last[t]["modules"] for t in trees},
                **{f"{t}_models": last[t]["models"] for t in trees},
                "loadavg": Path("/proc/loadavg").read_text().split()[:3],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
