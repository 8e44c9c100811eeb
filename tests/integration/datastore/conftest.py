"""Fixtures for the datastore conformance suite: each test gets a fresh, isolated keyspace.

``backend`` is parametrised over every Backend implementation. The etcd parametrisation comes
from ``etcd_fixture.py`` (a session-scoped ``etcd_server`` and ``make_etcd_backend``); while that
module is absent the etcdv3 cases are skipped with the reason. Per-backend facts the tests need
(a picklable spec other processes open, the shortest reliable TTL) live on ``BackendCase``.
The kubernetes parametrisation runs the backend against ``tests/k8s_fake_apiserver.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from backend_cases import BackendCase

from calico.datastore import Backend

_ETCD_IMPORT_ERROR: BaseException | None = None
try:
    # Importing registers its ``etcd_server`` fixture in this conftest's namespace.
    from etcd_fixture import etcd_server  # noqa: F401
except ModuleNotFoundError as exc:
    if exc.name != "etcd_fixture":
        _ETCD_IMPORT_ERROR = exc
    _ETCD_MISSING = exc.name == "etcd_fixture"
except Exception as exc:  # a broken fixture module fails only the etcd cases
    _ETCD_IMPORT_ERROR = exc
    _ETCD_MISSING = False
else:
    _ETCD_MISSING = False


_CASE = pytest.StashKey[BackendCase]()


def _local_case(tmp_path: Path) -> BackendCase:
    return BackendCase("local", {"kind": "local", "path": str(tmp_path / "calico.db")}, 1.0, 3.0)


def _etcd_case(request: pytest.FixtureRequest) -> BackendCase:
    if _ETCD_MISSING:
        pytest.skip("etcdv3: tests/integration/datastore/etcd_fixture.py is not there yet")
    if _ETCD_IMPORT_ERROR is not None:
        raise RuntimeError("etcd_fixture.py failed to import") from _ETCD_IMPORT_ERROR
    server = request.getfixturevalue("etcd_server")
    spec = {
        "kind": "etcdv3",
        "endpoints": server.endpoints,
        "prefix": f"/calico-test-{uuid.uuid4().hex[:12]}",
    }
    return BackendCase("etcdv3", spec, 1.0, 4.0)  # leases: ~1-1.5 s on the test server


def _kdd_case(request: pytest.FixtureRequest) -> BackendCase:
    """A fresh fake API server per test (an empty cluster); TTLs do not exist in Kubernetes."""
    from k8s_fake_apiserver import FakeAPIServer

    # No bookmarks: drain() counts every event, and a loaded run outlasts a real server's minute.
    api = FakeAPIServer(bookmark_interval=3600.0).start()
    request.addfinalizer(api.stop)
    case = BackendCase("kubernetes", {"kind": "kubernetes", "url": api.url}, 0.0, 0.0)
    case.compactor = lambda _backend, revision: api.compact(revision)
    return case


@pytest.fixture(params=["local", "etcdv3", "kubernetes"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A fresh Backend with an empty keyspace of its own."""
    if request.param == "local":
        case = _local_case(tmp_path)
    elif request.param == "etcdv3":
        case = _etcd_case(request)
    else:
        case = _kdd_case(request)
    request.node.stash[_CASE] = case
    try:
        yield case.open()
    finally:
        for opened in case.backends:
            opened.close()


@pytest.fixture
def backend_case(backend: Backend, request: pytest.FixtureRequest) -> BackendCase:
    """Facts about the ``backend`` under test (its spec for other processes, TTL limits)."""
    return request.node.stash[_CASE]
