"""Fixtures for the netlink kernel tests: a fresh "host" namespace per test."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from nlns import NS, netns

HOST_ADDR = "10.99.0.1"  # the host's own address (on lo), used as the source of test traffic


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as s:
        yield s


@pytest.fixture
def host() -> Iterator[NS]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2")
    with netns("calhost") as ns:
        ns.ip("addr", "add", f"{HOST_ADDR}/32", "dev", "lo")
        # Like a real node's default route: gives proxy ARP a route for 169.254.1.1 that is
        # not via the asking workload interface, so it answers for the gateway address.
        ns.ip("route", "add", "default", "dev", "lo")
        yield ns
