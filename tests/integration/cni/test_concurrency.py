"""20 pod starts at once, as a busy kubelet would issue them."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from cni_fixtures import CNIWorld

pytestmark = pytest.mark.root

N = 20


def test_concurrent_adds_get_unique_addresses(world: CNIWorld) -> None:
    namespaces = [world.workload_ns() for _ in range(N)]
    ids = [f"conc{i:02d}" for i in range(N)]
    start = time.monotonic()
    with ThreadPoolExecutor(N) as pool:
        results = list(pool.map(lambda a: world.add(*a), zip(ids, namespaces, strict=True)))
    elapsed = time.monotonic() - start
    for res in results:
        assert res.returncode == 0, res.stdout + res.stderr
    addrs = [r.doc["ips"][0]["address"] for r in results]
    assert len(set(addrs)) == N, addrs
    assert world.in_use() == N
    assert len(world.weps()) == N
    host_links = world.host_ip("-o", "link", "show")
    assert sum(f"cali{cid}" in host_links for cid in ids) == N
    print(f"{N} concurrent ADDs in {elapsed:.2f}s")

    with ThreadPoolExecutor(N) as pool:
        dels = list(pool.map(lambda a: world.delete(*a), zip(ids, namespaces, strict=True)))
    for res in dels:
        assert res.returncode == 0, res.stdout + res.stderr
    assert world.in_use() == 0
    assert world.weps() == []
    assert "cali" not in world.host_ip("link", "show")
