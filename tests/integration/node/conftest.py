"""A fresh network namespace with one known address, plus a temp local datastore, so node
startup's autodetection is deterministic and nothing touches the real host."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from node_netns import NODE_CIDR, NodeHost, ip


@pytest.fixture
def host(tmp_path: Path, calico_bin: str) -> Iterator[NodeHost]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2 for network namespaces")
    ns = f"calnode-{uuid.uuid4().hex[:8]}"
    ip("netns", "add", ns)
    try:
        ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", ns, "link", "add", "eth9", "type", "veth", "peer", "name", "peer9")
        ip("-n", ns, "link", "set", "eth9", "up")
        ip("-n", ns, "addr", "add", NODE_CIDR, "dev", "eth9")
        yield NodeHost(ns, tmp_path, calico_bin)
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
