"""Syncer fixtures: a recording consumer and backends (local SQLite and a real etcd)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from calico.datastore import Backend
from calico.datastore.local import LocalBackend

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "datastore"))
from etcd_fixture import etcd_server, make_etcd_backend  # noqa: F401
from syncer_helpers import Recorder


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture(params=["local", "etcdv3"])
def any_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "local":
        backend: Backend = LocalBackend(tmp_path / "calico.db")
    else:
        server = request.getfixturevalue("etcd_server")
        backend = make_etcd_backend(server.endpoints, f"/syncer-test-{uuid.uuid4().hex[:10]}")
    try:
        yield backend
    finally:
        backend.close()
