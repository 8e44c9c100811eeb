"""Fixtures for node unit tests: a throwaway local datastore."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from calico.datastore.client import Client
from calico.datastore.local import LocalBackend


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    backend = LocalBackend(str(tmp_path / "calico.db"))
    try:
        yield Client(backend)
    finally:
        backend.close()
