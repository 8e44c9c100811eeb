"""confd integration fixtures: a fresh datastore (embedded SQLite or the shared real etcd)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "datastore"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit"))
from etcd_fixture import etcd_server  # noqa: F401  (fixture)


@pytest.fixture(params=["local", "etcdv3"])
def datastore_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment a client or confd uses to reach a fresh, empty datastore."""
    if request.param == "local":
        yield {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": str(tmp_path / "calico.db")}
    else:
        server = request.getfixturevalue("etcd_server")
        yield {
            "DATASTORE_TYPE": "etcdv3",
            "ETCD_ENDPOINTS": server.endpoints,
            "CALICO_ETCD_PREFIX": f"/confd-{uuid.uuid4().hex[:10]}",
        }
