"""``calicoctl explain --live`` on a node running a real Felix: the kernel's nftables trace of a
probe agrees with the computed verdict, and a datastore that Felix has not programmed (drift)
is flagged as a disagreement."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from felix_dp_fixtures import Cluster
from harness import eventually, in_ns, tcp

pytestmark = pytest.mark.root

CALICOCTL = str(Path(sys.executable).parent / "calicoctl")
DENY_9090 = {
    "kind": "GlobalNetworkPolicy",
    "metadata": {"name": "live-deny-9090"},
    "spec": {
        "selector": "app == 'server'",
        "types": ["Ingress"],
        "ingress": [
            {"action": "Deny", "protocol": "TCP", "destination": {"ports": [9090]}},
            {"action": "Allow"},
        ],
    },
}


def explain_live(c: Cluster, db: Path, port: int) -> tuple[int, dict[str, Any], str]:
    env = {
        "DATASTORE_TYPE": "local",
        "CALICO_DATASTORE_PATH": str(db),
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
    }
    args = ["explain", "--from", "ns1/client", "--to", "ns1/server", "--port", str(port)]
    proc = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            c.host,
            "env",
            *[f"{k}={v}" for k, v in env.items()],
            CALICOCTL,
            *args,
            "--live",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    report = json.loads(proc.stdout) if proc.returncode == 0 else {}
    return proc.returncode, report, proc.stderr


def test_live_trace_agrees_with_the_computed_chain(policy_cluster: Cluster) -> None:
    c = policy_cluster
    client, server = c.w["client"], c.w["server"]
    c.ds.apply(DENY_9090)
    try:
        eventually(lambda: tcp(client, server.ip, 9090), "timeout")
        code, report, err = explain_live(c, c.workdir / "calico.db", 9090)
        assert code == 0, err
        live = report["live"]
        assert report["result"]["verdict"] == "Deny"
        assert live["verdict"] == "Deny" and live["agrees"] is True, live
        assert live["compared"] == "overall"
        # the kernel dropped in the policy's own chain, reached through the server's ingress chain
        assert "cali-pi-gnp/live-deny-9090" in live["rule"] and "(verdict drop)" in live["rule"]
        assert any(ch.endswith(f"cali-tw-{server.iface}") for ch in live["chains"]), live
        assert any(ch.endswith(f"cali-fw-{client.iface}") for ch in live["chains"]), live
        code, report, err = explain_live(c, c.workdir / "calico.db", 8080)
        assert code == 0, err
        assert report["live"]["verdict"] == "Allow" and report["live"]["agrees"] is True
        # our trace table is gone again; Felix's table is untouched
        tables = in_ns(c.host, "nft", "list", "tables").stdout
        assert "calico-explain" not in tables and "inet calico" in tables
    finally:
        c.ds.delete("GlobalNetworkPolicy", "live-deny-9090")


def test_live_flags_drift_between_datastore_and_dataplane(
    policy_cluster: Cluster, tmp_path: Path
) -> None:
    c = policy_cluster
    eventually(lambda: tcp(c.w["client"], c.w["server"].ip, 9090), "ok")
    # A datastore Felix does not read: it holds a deny the dataplane never got.
    drifted = tmp_path / "drifted.db"
    for suffix in ("", "-wal", "-shm"):  # SQLite in WAL mode: the log holds recent writes
        src = c.workdir / f"calico.db{suffix}"
        if src.exists():
            shutil.copy(src, f"{drifted}{suffix}")
    from harness import Datastore

    other = Datastore(str(drifted))
    try:
        other.apply(DENY_9090)
    finally:
        other.close()
    code, report, err = explain_live(c, drifted, 9090)
    assert code == 0, err
    assert report["result"]["verdict"] == "Deny"
    assert report["live"]["verdict"] == "Allow"
    assert report["live"]["agrees"] is False


def test_live_needs_the_hosting_node(policy_cluster: Cluster) -> None:
    c = policy_cluster
    env = {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": str(c.workdir / "calico.db")}
    args = ["explain", "--from", "ns1/client", "--to", "ns1/server", "--port", "80", "--live"]
    # From the outside netns the workload's interface does not exist.
    proc = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            c.outside,
            "env",
            *[f"{k}={v}" for k, v in env.items()],
            CALICOCTL,
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("--live must run on the node hosting the source"), proc.stderr
