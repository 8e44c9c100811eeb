"""A fresh network namespace with one known address, plus a temp local datastore, so node
startup's autodetection is deterministic and nothing touches the real host."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from netns_support import add_veth, ip, netns
from node_netns import NODE_CIDR, NodeHost


@pytest.fixture
def host(tmp_path: Path, calico_bin: str) -> Iterator[NodeHost]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2 for network namespaces")
    with netns("calnode") as ns:
        add_veth("eth9", "peer9", ns=ns)
        ip("link", "set", "eth9", "up", ns=ns)
        ip("addr", "add", NODE_CIDR, "dev", "eth9", ns=ns)
        yield NodeHost(ns, tmp_path, calico_bin)
