"""A clean Felix start imports no pydantic and no ``calico.api`` model module: a fresh process
imports Felix's start-up modules (``bench_felix_imports.MODULES``), then runs the start-up read
(the config load, the encapsulation check and every stored resource through the Felix
syncer's conversion) on the cold-start bench's datastore plus a FelixConfiguration
``default`` and a Node, and reports ``sys.modules`` (design/performance.md "Cold start: no
pydantic on a clean start"). The same child is ``bench_felix_startup_read.py``'s, untimed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


def _bench() -> Any:
    path = ROOT / "benchmarks" / "bench_felix_startup_read.py"
    spec = importlib.util.spec_from_file_location("bench_felix_startup_read", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_clean_start_imports_no_pydantic(tmp_path: Path) -> None:
    bench = _bench()
    db = str(tmp_path / "calico.db")
    bench.write_datastore(db, str(ROOT))
    got = bench.read(db, str(ROOT), str(tmp_path))
    assert got["pydantic_before_read"] is False  # Felix's start-up imports
    assert got["pydantic"] is False, got  # ... and the read itself
    assert got["api_modules"] == []
    # every stored resource converted (none declined into the models and failed), and the
    # config the calc graph will see is the one calico-node's documents give
    assert got["outputs"] == len(bench.documents()) + 4  # + ClusterInformation, 3 tiers
    assert got["global_config"] | {"ClusterGUID": "", "CalicoVersion": ""} == {
        "ClusterGUID": "",
        "CalicoVersion": "",
        "FloatingIPs": "Disabled",
        "HealthPort": "9099",
        "LogSeverityScreen": "Info",
        "ReportingIntervalSecs": "0",
    }
    assert got["host_config"] == {"IpInIpTunnelAddr": "10.65.0.1"}
    assert set(got["kinds"]) >= {"FelixConfiguration", "Node", "Profile", "WorkloadEndpoint"}
