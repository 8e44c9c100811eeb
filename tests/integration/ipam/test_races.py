"""Concurrent allocators in separate processes on a real datastore never share an address."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from calico.api.ipam import IPPool, IPPoolSpec
from calico.datastore.client import Client
from calico.ipam import IPAMClient

WORKER = Path(__file__).resolve().parent / "ipam_worker.py"


def run_workers(spec: dict[str, Any], jobs: list[tuple[str, int, str]]) -> list[list[str]]:
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), json.dumps(spec), host, str(n), tag],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for host, n, tag in jobs
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline().strip()
            assert line == "ready", p.stderr.read() if p.stderr else line
        for p in procs:  # release them all at once
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def make_pool(client: Client, cidr: str = "10.10.0.0/20") -> None:
    pool = IPPool(spec=IPPoolSpec(cidr=cidr))
    pool.metadata.name = "pool"
    client.create(pool)


@pytest.mark.parametrize("same_host", [True, False], ids=["same-host", "different-hosts"])
def test_processes_never_duplicate(
    store_spec: dict[str, Any], spec_client: Client, same_host: bool
) -> None:
    make_pool(spec_client)
    # 8 x 50 against one host on SQLite; smaller runs elsewhere keep the suite fast.
    local = store_spec["kind"] == "local"
    procs, each = (8, 50 if same_host else 25) if local else (4, 25)
    jobs = [("node-0" if same_host else f"node-{i}", each, f"w{i}") for i in range(procs)]
    results = run_workers(store_spec, jobs)
    every = [ip for r in results for ip in r]
    assert len(every) == procs * each and len(set(every)) == procs * each
    ipam = IPAMClient(spec_client)
    # Each host claimed only what it needed (upstream: one affinity per block).
    affs = ipam.store.list_affinities()
    assert all(a.spec.state == "confirmed" for a in affs)
    assert len({a.spec.cidr for a in affs}) == len(affs)
    if same_host:
        # Processes of one host racing past a full block may each claim a fresh one
        # (upstream serialises them with a host-wide CNI lock), but never more than that.
        need = -(-procs * each // 64)
        assert need <= len(affs) <= need + procs
    # Every handle is releasable and everything is free again afterwards.
    released = []
    for i in range(procs):
        for j in range(each):
            released += ipam.release_by_handle(f"w{i}-{j}")
    assert sorted(released) == sorted(every)
    assert ipam.store.list_handles() == []
    assert all(s.block.is_empty() for s in ipam.store.list_blocks())


def test_two_processes_racing_for_one_block(
    store_spec: dict[str, Any], spec_client: Client
) -> None:
    make_pool(spec_client, "10.20.0.0/26")  # one block: one host wins it, the other borrows
    results = run_workers(store_spec, [("a", 15, "a"), ("b", 15, "b")])
    every = results[0] + results[1]
    assert len(set(every)) == 30
    affs = IPAMClient(spec_client).store.list_affinities()
    assert len(affs) == 1 and affs[0].spec.state == "confirmed"
