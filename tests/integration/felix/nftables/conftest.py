"""Fixtures for nftables integration tests: every test gets its own fresh network namespace."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from netns_helpers import Netns, fresh_netns


@pytest.fixture
def netns() -> Iterator[Netns]:
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"):
        pytest.skip("needs root, iproute2 and nft")
    with fresh_netns() as ns:
        yield ns
