"""``calicoctl explain`` through the conversion cache (calico.policyeval.convcache), on each
datastore: cold, warm and uncached answers are identical, and a warm explain imports neither
pydantic nor the v3 models (the import floor)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ctl_helpers import Ctl, run_bin
from test_explain_cli import MANIFEST

from calico.datastore import config as dsconfig
from calico.datastore.factory import open_backend
from calico.model.resources import resource_prefix

# Stored as-is (apply would refuse them): the processors reject both, and explain logs that.
BAD = {
    "GlobalNetworkPolicy": {
        "apiVersion": "projectcalico.org/v3",
        "kind": "GlobalNetworkPolicy",
        "metadata": {"name": "security.bad"},
        "spec": {"tier": "security", "selector": "app == 'web'", "ingress": [{"action": "No"}]},
    },
}

COMMANDS = [
    ["explain", "--from", "prod/front", "--to", "prod/web", "--port", "80", "-o", "json"],
    ["explain", "--from", "prod/front", "--to", "prod/web", "--port", "81"],
    ["explain", "--from", "192.168.0.1", "--to", "10.0.0.2", "--port", "80", "-o", "yaml"],
    ["-l", "warn", "explain", "endpoint", "prod/web", "-o", "json"],
    ["-l", "warn", "explain", "policy", "security.bad"],
    ["explain", "policy", "allow-front", "-n", "prod"],
    # Between nodes: the IP pools and Nodes are read for the tunnel device (cached too).
    ["explain", "--from", "prod/front", "--to", "prod/db", "--port", "5432", "-o", "json"],
    # A host endpoint side: its node's FelixConfigurations are converted (and cached); the
    # failsafe ports are still parsed with the API's ProtoPort (pydantic) on every run.
    ["explain", "--from", "203.0.113.9", "--to", "hep/node1-eth0", "--port", "2222", "-o", "json"],
    ["get", "workloadendpoint", "node1-k8s-web-eth0", "-n", "prod", "--show-policies"],
]

# Runs calicoctl's entry point in this interpreter and reports what it imported.
PROBE = """
import contextlib, io, json, sys
from calico.cli.main import main
sys.argv = ["calicoctl", *sys.argv[1:]]
out, code = io.StringIO(), 0
try:
    with contextlib.redirect_stdout(out):
        main()
except SystemExit as exc:
    code = exc.code
mods = [m for m in sys.modules if m.startswith(("pydantic", "calico.api.policy",
        "calico.api.endpoints", "calico.api.base", "calico.datastore.client"))]
sys.stderr.write(json.dumps({"code": code, "out": out.getvalue(), "mods": mods}))
"""


# A host endpoint side reads the FelixConfigurations (failsafe ports): converted, and cached.
FELIX_CONFIG = """
apiVersion: projectcalico.org/v3
kind: FelixConfiguration
metadata: {name: default}
spec:
  failsafeInboundHostPorts: [{protocol: TCP, port: 2222}]
---
apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {name: pool4}
spec: {cidr: 10.0.0.0/16, vxlanMode: Always}
---
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node1}
spec: {bgp: {ipv4Address: 192.168.0.1/24}, ipv4VXLANTunnelAddr: 10.0.100.1}
---
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node2}
spec: {bgp: {ipv4Address: 192.168.0.2/24}, ipv4VXLANTunnelAddr: 10.0.200.1}
---
apiVersion: projectcalico.org/v3
kind: WorkloadEndpoint
metadata: {name: node2-k8s-db-eth0, namespace: prod, labels: {app: db}}
spec: {node: node2, orchestrator: k8s, pod: db, endpoint: eth0, interfaceName: cali3,
       ipNetworks: [10.0.1.3/32], profiles: [kns.prod]}
"""


@pytest.fixture
def valid(ctl: Ctl, ds_env: dict[str, str]) -> dict[str, str]:
    assert ctl("apply", "-f", "-", stdin=MANIFEST + "---" + FELIX_CONFIG).code == 0
    return ds_env


def _store_bad(ds_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in ds_env.items():
        monkeypatch.setenv(key, value)
    backend = open_backend(dsconfig.load(None))
    try:
        for kind, doc in BAD.items():
            backend.apply(resource_prefix(kind) + doc["metadata"]["name"], json.dumps(doc))
    finally:
        backend.close()


@pytest.fixture
def stored(valid: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    _store_bad(valid, monkeypatch)
    return valid


def _with_cache(env: dict[str, str], path: Path) -> dict[str, str]:
    return {**env, "CALICO_CONVERSION_CACHE": str(path)}


def test_cold_warm_and_uncached_answers_are_identical(
    stored: dict[str, str], tmp_path: Path
) -> None:
    cache = tmp_path / "conversions.bin"
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    never = _with_cache(stored, blocker / "c.bin")  # unwritable: every run converts
    for args in COMMANDS:
        cache.unlink(missing_ok=True)
        uncached = run_bin(never, *args)
        cold = run_bin(_with_cache(stored, cache), *args)
        assert cache.exists(), args
        warm = run_bin(_with_cache(stored, cache), *args)
        assert cold == uncached == warm, args
    assert "Ignoring GlobalNetworkPolicy security.bad" in run_bin(never, *COMMANDS[4]).err
    hep = run_bin(_with_cache(stored, cache), *COMMANDS[7]).out
    assert "failsafe port tcp:2222" in hep  # the stored (not a default) failsafe port


def _probe(env: dict[str, str], *args: str) -> dict[str, object]:
    full = {k: v for k, v in os.environ.items() if k not in env}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env={**full, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    result: dict[str, object] = json.loads(proc.stderr.strip().splitlines()[-1])
    return result


def test_warm_explain_needs_neither_pydantic_nor_the_models(
    valid: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {**_with_cache(valid, tmp_path / "c.bin"), "PYTHONDONTWRITEBYTECODE": "1"}
    for args in (COMMANDS[0], COMMANDS[6]):
        cold, warm = _probe(env, *args), _probe(env, *args)
        assert cold["code"] == warm["code"] == 0
        assert cold["out"] == warm["out"]
        assert "pydantic" in cold["mods"]  # the probe can see the models being imported
        assert warm["mods"] == [], args
    assert "vxlan" in str(cold["out"]).lower()  # the tunnel was worked out from pool and Nodes
    cold = _probe(env, *COMMANDS[0])
    # A resource the processors reject is never kept: every explain that needs it (one that
    # selects web) validates it again, through the models.
    _store_bad(valid, monkeypatch)
    for _ in range(2):
        again = _probe(env, *COMMANDS[0])
        assert again["out"] == cold["out"]
        assert "pydantic" in again["mods"]
