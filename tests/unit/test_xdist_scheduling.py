"""The suite's xdist scheduler: kernel tiers on one worker, serial and in order."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from xdist_scheduling import KERNEL_UNIT, work_unit_of

TESTS = Path(__file__).resolve().parent.parent

pytest.importorskip("xdist")


@pytest.mark.parametrize(
    ("nodeid", "unit"),
    [
        ("tests/integration/test_runit.py::test_x", KERNEL_UNIT),
        ("tests/integration/felix/dataplane/test_a.py::TestB::test_c[1]", KERNEL_UNIT),
        ("tests/e2e/test_node_run.py::test_y", KERNEL_UNIT),
        ("tests/unit/test_backoff.py::test_z", "tests/unit/test_backoff.py"),
        ("tests/unit/felix/test_a.py::TestB::test_c[a::b]", "tests/unit/felix/test_a.py"),
        ("tests/unit/test_integration_names.py::test_q", "tests/unit/test_integration_names.py"),
        ("tests/e2efoo/test_a.py::test_b", "tests/e2efoo/test_a.py"),
    ],
)
def test_work_unit_of(nodeid: str, unit: str) -> None:
    assert work_unit_of(nodeid) == unit


KERNEL_TEST = """
import os, pytest
@pytest.mark.parametrize("n", range(4))
def test_k(n):
    with open(os.environ["ORDER_LOG"], "a") as f:
        f.write(f"{os.environ['PYTEST_XDIST_WORKER']} {__name__} {n}\\n")
"""
UNIT_TEST = """
import os, time
def test_u():
    time.sleep(0.05)
    with open(os.environ["ORDER_LOG"], "a") as f:
        f.write(f"{os.environ['PYTEST_XDIST_WORKER']} {__name__}\\n")
"""


def _run(tree: Path, log: Path, *args: str) -> list[str]:
    log.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, "tests"],
        cwd=tree,
        env={"ORDER_LOG": str(log), "PYTEST_XDIST_WORKER": "serial", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return log.read_text().splitlines()


def test_kernel_tiers_run_on_one_worker_in_collection_order(tmp_path: Path) -> None:
    """A fake tree with the suite's real root conftest and scheduler, run as ``make test`` does."""
    tree = tmp_path / "tree"
    for sub in ("unit/deep", "integration/sub", "e2e"):
        (tree / "tests" / sub).mkdir(parents=True)
    (tree / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    for name in ("conftest.py", "xdist_scheduling.py"):
        (tree / "tests" / name).write_text((TESTS / name).read_text())
    for mod in ("e2e/test_e1", "e2e/test_e2", "integration/test_i1", "integration/sub/test_i2"):
        (tree / "tests" / f"{mod}.py").write_text(KERNEL_TEST)
    for i in range(8):
        (tree / "tests" / ("unit/deep" if i % 2 else "unit") / f"test_u{i}.py").write_text(
            UNIT_TEST
        )
    log = tmp_path / "order.log"

    serial = _run(tree, log)
    parallel = _run(tree, log, "-n", "2", "--dist", "loadscope")

    def kernel(lines: list[str]) -> list[str]:
        return [line.split(" ", 1)[1] for line in lines if not line.split()[1].startswith("test_u")]

    assert kernel(parallel) == kernel(serial)  # same tests, same order
    assert len(kernel(serial)) == 16
    kernel_workers = {line.split()[0] for line in parallel if line.split()[1].startswith("test_i")}
    kernel_workers |= {line.split()[0] for line in parallel if line.split()[1].startswith("test_e")}
    assert len(kernel_workers) == 1, parallel
    assert {line.split()[0] for line in parallel} == {"gw0", "gw1"}  # the unit tier did spread
    assert sorted(line for line in serial if "test_u" in line) == [
        f"serial test_u{i}" for i in range(8)
    ]
