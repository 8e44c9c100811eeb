"""Fixtures driving calicoctl's real command line against each datastore (see ctl_helpers)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for _extra in (HERE, HERE.parent / "datastore"):
    if str(_extra) not in sys.path:
        sys.path.insert(0, str(_extra))

from ctl_helpers import Ctl, datastore_env, invoke, run_bin  # noqa: E402
from etcd_fixture import etcd_server  # noqa: E402, F401  (fixture)


@pytest.fixture(params=["local", "etcdv3"])
def ds_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Datastore environment for one test, on each backend."""
    yield datastore_env(request.param, tmp_path, request)


@pytest.fixture
def local_env(tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    return datastore_env("local", tmp_path, request)


@pytest.fixture
def ctl(ds_env: dict[str, str]) -> Ctl:
    """Run ``calico ctl ...`` in-process against this test's datastore."""
    return lambda *args, stdin=None: invoke(ds_env, *args, stdin=stdin)


@pytest.fixture
def ctl_bin(ds_env: dict[str, str]) -> Ctl:
    """Run the ``calicoctl`` console script against this test's datastore."""
    return lambda *args, stdin=None: run_bin(ds_env, *args, stdin=stdin)
