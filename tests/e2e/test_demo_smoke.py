"""The ``make run`` demo, non-interactively, against a node in its own host netns."""

from __future__ import annotations

import pytest
from node_harness import PY, Node, run

pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]


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
    assert "CNI DEL e2edemo-backend/web: done" in out
    assert not running_node.state_dir.joinpath("demo.json").exists()
    assert "e2edemo" not in run("ip", "netns", "list").stdout
