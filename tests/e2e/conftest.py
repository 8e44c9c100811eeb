"""Fixtures: a ``calico node run`` in its own host netns, torn down whatever happens."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from node_harness import Node, host_netns, require_root


@pytest.fixture(scope="module")
def running_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """One node shared by a module's read-mostly tests, started and ready."""
    require_root()
    with host_netns() as host:
        node = Node(host, tmp_path_factory.mktemp("node"))
        try:
            node.start()
            node.wait_ready()
            yield node
        finally:
            node.teardown()


@pytest.fixture
def fresh_node(tmp_path: Path) -> Iterator[Node]:
    """A node the test starts and stops itself (not started yet)."""
    require_root()
    with host_netns() as host:
        node = Node(host, tmp_path)
        try:
            yield node
        finally:
            node.teardown()
