"""Fixtures for IPAM integration tests: a datastore spec other processes can open too."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "datastore"))

from etcd_fixture import etcd_server  # noqa: F401
from ipam_worker import open_backend

from calico.datastore.client import Client


@pytest.fixture(params=["local", "etcdv3"])
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    if request.param == "local":
        return {"kind": "local", "path": str(tmp_path / "calico.db")}
    server = request.getfixturevalue("etcd_server")
    return {
        "kind": "etcdv3",
        "endpoints": server.endpoints,
        "prefix": f"/ipam-test-{uuid.uuid4().hex[:12]}",
    }


@pytest.fixture
def spec_client(store_spec: dict[str, Any]) -> Iterator[Client]:
    backend = open_backend(store_spec)
    try:
        yield Client(backend)
    finally:
        backend.close()


@pytest.fixture
def local_client(tmp_path: Path) -> Iterator[Client]:
    backend = open_backend({"kind": "local", "path": str(tmp_path / "calico.db")})
    try:
        yield Client(backend)
    finally:
        backend.close()
