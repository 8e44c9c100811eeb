"""Golden files: each scenario under confd_golden/ renders the six BIRD files, which must equal
the recorded ones (blank lines ignored, as upstream's comparison), contain the lines its
``expect`` file names from the documented behaviour (``!`` = must not contain), and pass
``bird -p -c`` / ``bird6 -p -c``. A ``secrets.yaml`` holds the Secrets passwords resolve
against, ``endpoint-status/`` the node's endpoint status files (local workload peers),
``k8s.yaml`` Services and EndpointSlices (per-service advertisement).
``UPDATE_EXPECTED_DATA=true`` rewrites the recordings."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from confd_render_support import (
    FILES,
    GOLDEN,
    render_state,
    scenario_env,
    scenario_k8s,
    scenario_passwords,
    scenario_state,
    scenario_workloads,
)

CASES = sorted(p for p in GOLDEN.iterdir() if (p / "input.yaml").is_file())
needs_bird = pytest.mark.skipif(shutil.which("bird") is None, reason="BIRD not installed")


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def test_at_least_25_scenarios() -> None:
    assert len(CASES) >= 25


@needs_bird
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden(case: Path, tmp_path: Path) -> None:
    confdir = tmp_path / "confd"
    render_state(
        scenario_state(case),
        confdir,
        scenario_env(case),
        passwords=scenario_passwords(case),
        workloads=scenario_workloads(case),
        k8s=scenario_k8s(case),
    )
    out = confdir / "config"
    expected_dir = case / "expected"
    if os.environ.get("UPDATE_EXPECTED_DATA") == "true":
        expected_dir.mkdir(exist_ok=True)
        for name in FILES:
            shutil.copyfile(out / name, expected_dir / name)
    for name in FILES:
        assert _lines((out / name).read_text()) == _lines((expected_dir / name).read_text()), name
    for raw in (case / "expect").read_text().splitlines():
        negate = raw.startswith("!")
        name, _, line = raw.lstrip("!").partition(": ")
        present = any(
            line.strip() == got.strip() or line in got for got in _lines((out / name).read_text())
        )
        assert present != negate, f"{name}: {'unexpected' if negate else 'missing'} {line!r}"
    for daemon, name in (("bird", "bird.cfg"), ("bird6", "bird6.cfg")):
        res = subprocess.run([daemon, "-p", "-c", str(out / name)], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
