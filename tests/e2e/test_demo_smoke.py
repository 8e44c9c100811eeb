"""The ``make run`` demo, non-interactively, against a node in its own host netns."""

from __future__ import annotations

import pytest
from node_harness import PY, Node, run

pytestmark = [pytest.mark.root, pytest.mark.timeout(180)]


def test_demo_runs_non_interactively(running_node: Node) -> None:
    res = run(
        PY,
        "-m",
        "calico.node.run.demo",
        "--non-interactive",
        "--prefix",
        "e2edemo",
        "--netns",
        running_node.host,
        "--state-dir",
        str(running_node.state_dir),
        check=False,
    )
    out = res.stdout
    assert res.returncode == 0, out + res.stderr
    assert out.count("allowed: HTTP 200") == 3
    assert "BLOCKED" in out
    assert "Demo checks passed." in out
    # Step 7: Felix's flow log of the blocked request reached Goldmane and whisker-backend.
    assert "Step 7. Flow logs" in out
    assert "e2edemo-frontend/untrusted -> e2edemo-backend/web tcp/8080: Deny" in out, out
    assert "GlobalNetworkPolicy default/e2edemo-allow-trusted rule 1: Deny" in out
    assert "and filter the flows to Deny" in out
    assert "CNI DEL e2edemo-backend/web: done" in out
    assert not running_node.state_dir.joinpath("demo.json").exists()
    assert "e2edemo" not in run("ip", "netns", "list").stdout
