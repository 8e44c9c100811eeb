"""``calico node cluster up`` / ``down`` (what ``make cluster`` / ``make cluster-down`` run):
three nodes, the demo across nodes passes, and ``down`` leaves no namespace, process or file."""

from __future__ import annotations

from pathlib import Path

import pytest
from netns_support import unique_name
from node_harness import CALICO, require_root, run

from calico.node.cluster import fabric
from calico.node.cluster import procs as cluster_procs

pytestmark = [pytest.mark.root, pytest.mark.timeout(600)]


def test_cluster_up_runs_the_demo_and_down_removes_everything(tmp_path: Path) -> None:
    require_root()
    name = unique_name("clm", 6)
    root = tmp_path / "root"
    try:
        up = run(CALICO, "node", "cluster", "up", "--name", name, "--root", str(root),
                 check=False, timeout=400)  # fmt: skip
        out = up.stdout + up.stderr
        assert up.returncode == 0, out
        assert "Cluster demo checks passed." in out
        assert "demo-frontend/untrusted" in out and "BLOCKED" in out
        status = run(CALICO, "node", "cluster", "status", "--root", str(root))
        assert status.stdout.count("running (pid") == 3
        assert len(fabric.cluster_netns(name)) == 3 + 2 + 3  # nodes, lan + world, demo pods
        assert cluster_procs.marked(str(root))  # etcd, nodes, the demo's server
    finally:
        down = run(CALICO, "node", "cluster", "down", "--name", name, "--root", str(root),
                   check=False, timeout=200)  # fmt: skip
    assert down.returncode == 0, down.stdout + down.stderr
    assert fabric.cluster_netns(name) == []
    assert cluster_procs.marked(str(root)) == []
    assert not root.exists()
    again = run(CALICO, "node", "cluster", "down", "--name", name, "--root", str(root))
    assert f"No cluster {name} at {root}." in again.stdout
