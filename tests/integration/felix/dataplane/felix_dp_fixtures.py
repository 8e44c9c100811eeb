"""Fixtures for Felix dataplane tests: a host netns running Felix plus workloads (harness.py)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from harness import (
    POOL,
    Datastore,
    Felix,
    Workload,
    eventually,
    host_netns_setup,
    namespace_profile,
    netns,
    servers,
    tcp,
    workload,
)


def need_root() -> None:
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"):
        pytest.skip("needs root, iproute2 and nft")


@dataclass
class Cluster:
    host: str
    outside: str
    ds: Datastore
    felix: Felix
    workdir: Path
    w: dict[str, Workload] = field(default_factory=dict)


@contextlib.contextmanager
def cluster(workdir: Path, **felix_env: str) -> Iterator[Cluster]:
    """Host netns + datastore (pool, namespace profiles) + a started, ready Felix."""
    with netns("fxhost") as host, netns("fxext") as outside:
        host_netns_setup(host, outside)
        ds = Datastore(str(workdir / "calico.db"))
        felix = Felix(host, workdir, env=dict(felix_env))
        try:
            ds.apply(
                {
                    "kind": "IPPool",
                    "metadata": {"name": "pool1"},
                    "spec": {"cidr": POOL, "natOutgoing": True},
                }
            )
            for ns in ("ns1", "ns2"):
                namespace_profile(ds, ns)
            felix.start()
            felix.wait_ready()
            yield Cluster(host, outside, ds, felix, workdir)
        finally:
            felix.kill()
            ds.close()


# Felix's dataplanes. A module runs on both with
# ``pytest.mark.parametrize("policy_cluster", sorted(DATAPLANES), indirect=True, scope="module")``
# (design/felix-bpf.md "Tests"); without it, on nftables.
# BPF: the uplink is the data interface, so host endpoints on it are BPF's (not nftables').
DATAPLANES = {
    "nftables": {},
    "bpf": {"FELIX_BPFENABLED": "true", "FELIX_BPFDATAIFACEPATTERN": "^uplink0$"},
}


@pytest.fixture(scope="module")
def policy_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Felix with three workloads: client (ns1), server (ns1, named port), other (ns2)."""
    need_root()
    dataplane = getattr(request, "param", "nftables")
    if dataplane == "bpf" and not shutil.which("clang"):
        pytest.skip("BPF dataplane needs clang")
    workdir = tmp_path_factory.mktemp("felix")
    with cluster(workdir, **DATAPLANES[dataplane]) as c:
        ports = [{"name": "http", "protocol": "TCP", "port": 8080}]
        with (
            workload(c.host, c.ds, "client", "10.65.0.1", labels={"app": "client"}) as w1,
            workload(
                c.host, c.ds, "server", "10.65.0.2", labels={"app": "server"}, ports=ports
            ) as w2,
            workload(
                c.host, c.ds, "other", "10.65.1.3", namespace="ns2", labels={"app": "x"}
            ) as w3,
            servers(w2, "tcp:8080", "tcp:9090", "udp:5353"),
        ):
            c.w.update(client=w1, server=w2, other=w3)
            # Every workload programmed before the first test (BPF compiles take a while).
            for w in (w1, w3):
                eventually(lambda w=w: tcp(w, w2.ip, 8080), "ok")
            yield c
