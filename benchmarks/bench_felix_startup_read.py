"""Felix's start-up read alone: CPU of converting the bench's datastore in a fresh process,
for an older tree and this one, alternating; and which modules (pydantic?) the read imports.

Usage: ``bench_felix_startup_read.py OLD_TREE [--rounds N]``. A datastore is written once
(through the Client, as the CNI plugin and calico-node write): ``bench_felix.py``'s cold-start
shape (1 IPPool, the ``kns.bench`` Profile, 100 NetworkPolicies, 100 WorkloadEndpoints) plus
what every real cluster also has, a FelixConfiguration ``default`` and this host's Node. Each
child imports ``bench_felix_imports.MODULES`` (Felix's start-up imports), then times
``load_datastore_config``, ``load_encapsulation`` and every stored resource through the Felix
syncer's watcher cache (``_WatcherCache._convert``, thread CPU per kind), and reports whether
pydantic and ``calico.api`` model modules were imported (design/performance.md "Cold start: no
pydantic on a clean start"). ``tests/unit/felix/test_cold_start_imports.py`` runs the same
child on this tree without timing it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from felix_shapes import (  # noqa: E402  (benchmarks/felix_shapes.py)
    NAMESPACE,
    client_labels,
    noise_policies,
    real_cluster_config,
)
from tree_pairs import alternate_trees, run_tree_child  # noqa: E402  (benchmarks/tree_pairs.py)

BENCH = "felix_startup_read"
HOSTNAME = "fxnode"


def documents() -> list[dict[str, Any]]:
    """The bench's cold-start datastore, as ``bench_felix.py`` writes it (the noise policies
    alone), plus calico-node's two first-start documents."""
    docs: list[dict[str, Any]] = [
        {"kind": "IPPool", "metadata": {"name": "p"}, "spec": {"cidr": "10.65.0.0/16"}},
        {
            "kind": "Profile",
            "metadata": {"name": f"kns.{NAMESPACE}"},
            "spec": {
                "ingress": [{"action": "Allow"}],
                "egress": [{"action": "Allow"}],
                "labelsToApply": {"projectcalico.org/name": NAMESPACE},
            },
        },
        *real_cluster_config(
            HOSTNAME,
            "10.64.0.1/24",
            "10.64.0.1",
            ipip_tunnel_addr="10.65.0.1",
            extra_felix_spec={"healthPort": 9099},
        ),
        *noise_policies(100),
    ]
    for i in range(100):
        pod = f"c{i}"
        docs.append(
            {
                "kind": "WorkloadEndpoint",
                "metadata": {
                    "name": f"{HOSTNAME}-k8s-{pod}-eth0",
                    "namespace": NAMESPACE,
                    "labels": {
                        **client_labels(i),
                        "projectcalico.org/namespace": NAMESPACE,
                        "projectcalico.org/orchestrator": "k8s",
                    },
                },
                "spec": {
                    "orchestrator": "k8s",
                    "workload": pod,
                    "pod": pod,
                    "node": HOSTNAME,
                    "endpoint": "eth0",
                    "interfaceName": f"cali{i:011d}",
                    "ipNetworks": [f"10.65.0.{10 + i}/32"],
                    "profiles": [f"kns.{NAMESPACE}"],
                    "mac": f"ee:ee:ee:ee:{i // 256:02x}:{i % 256:02x}",
                },
            }
        )
    return docs


WRITER = """
import json, sys
from calico.api.io import parse_resource
from calico.datastore.client import Client
from calico.datastore.config import DatastoreConfig
from calico.datastore.factory import open_backend
backend = open_backend(DatastoreConfig(local_path=sys.argv[1]))
client = Client(backend)
for doc in json.loads(sys.stdin.read()):
    client.apply(parse_resource({"apiVersion": "projectcalico.org/v3", **doc}))
backend.close()
"""

CHILD = """
import json, sys, time
from calico.codecache import install
install()
from calico.gcpause import pause
pause()
import importlib
for name in sys.argv[2].split(","):
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:  # a module this (older) tree does not have
        if exc.name != name:
            raise
imported_before = "pydantic" in sys.modules
import queue, threading
from calico.datastore.config import DatastoreConfig
from calico.datastore.factory import open_backend
from calico.felix.startup_config import load_datastore_config, load_encapsulation
from calico.syncer import watchersyncer
from calico.syncer.definitions import felix_resource_types
backend = open_backend(DatastoreConfig(local_path=sys.argv[1]))
cpu = time.thread_time
t0 = cpu()
config = load_datastore_config(backend, sys.argv[3])
encap = load_encapsulation(backend)
kinds = {"config_load": cpu() - t0}
outputs = {}
for rtype in felix_resource_types():
    kvs = backend.list(rtype.prefix).kvs
    if not kvs:
        continue
    cache = watchersyncer._WatcherCache(0, rtype, backend, queue.Queue(), threading.Event())
    t1 = cpu()
    for kv in kvs:
        key = cache.source_key(kv.key)
        out = cache._convert(key, kv.value)
        outputs[kv.key] = sorted(map(repr, out))
    kinds[rtype.kind] = cpu() - t1
total = cpu() - t0
models = sorted(m for m in sys.modules if m.startswith("calico.api.") and m not in (
    "calico.api.kind_table", "calico.api.felixdefaults", "calico.api.validators",
    "calico.api.ruleparse", "calico.api.policynames"))
print(json.dumps({
    "cpu_s": total, "kinds": kinds, "pydantic": "pydantic" in sys.modules,
    "pydantic_before_read": imported_before, "api_modules": models,
    "global_config": config.global_config, "host_config": config.host_config,
    "encap": repr(encap), "outputs": len(outputs),
}))
"""


def write_datastore(path: str, tree: str | None = None) -> None:
    """The datastore, written by a child process (the writer imports the models)."""
    env = dict(os.environ, PYTHONPATH=tree or str(ROOT))
    subprocess.run(
        [sys.executable, "-c", WRITER, path],
        input=json.dumps(documents()),
        text=True,
        check=True,
        env=env,
        timeout=300,
    )


def start_modules() -> tuple[str, ...]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_felix_imports import MODULES

    return MODULES


def read(db: str, tree: str | None, cwd: str) -> dict[str, Any]:
    """One fresh process's start-up read of ``db`` with ``tree`` on its path."""
    return run_tree_child(CHILD, [db, ",".join(start_modules()), HOSTNAME], tree or str(ROOT), cwd)


def show(rnd: int, name: str, got: dict[str, Any]) -> None:
    line = {k: got[k] for k in ("cpu_s", "kinds", "pydantic", "api_modules")}
    print(json.dumps({"round": rnd, "tree": name, **line}), flush=True)


def main() -> int:
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    old = str(Path(args[0]).resolve())
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 8
    trees = {"old": old, "new": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="bench-felix-read-") as cwd:
        db = str(Path(cwd) / "calico.db")
        write_datastore(db)
        cpu, last = alternate_trees(trees, rounds, lambda tree: read(db, tree, cwd), show)
    same = all(last["old"][k] == last["new"][k] for k in ("global_config", "host_config"))
    new, base = statistics.median(cpu["new"]), statistics.median(cpu["old"])
    print(
        json.dumps(
            {
                "bench": BENCH,
                "metric": "startup_read_cpu_s",
                "value": round(new, 4),
                "baseline": round(base, 4),
                "ratio": round(new / base, 4),
                "rounds": rounds,
                "config_equal": same,
                **{
                    f"{t}_cpu": {
                        "min": round(min(v), 4),
                        "median": round(statistics.median(v), 4),
                        "max": round(max(v), 4),
                    }
                    for t, v in cpu.items()
                },
                **{f"{t}_pydantic": last[t]["pydantic"] for t in trees},
                "loadavg": Path("/proc/loadavg").read_text().split()[:3],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
