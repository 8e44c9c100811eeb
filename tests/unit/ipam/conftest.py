"""In-memory datastore fixtures for the IPAM unit tests."""

from __future__ import annotations

import pytest
from memstore import MemoryBackend

from calico.datastore.client import Client
from calico.ipam import IPAMClient


@pytest.fixture
def client() -> Client:
    return Client(MemoryBackend())


@pytest.fixture
def ipam(client: Client) -> IPAMClient:
    return IPAMClient(client)
