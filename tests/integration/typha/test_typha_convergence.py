"""A real Typha process over a real datastore (the embedded SQLite file and etcd v3): 50 client
connections in this process plus 3 client processes converge to exactly the state a direct
datastore syncer computes, and again after a Typha restart during which the datastore changed
(keys deleted meanwhile arrive as synthesised deletes)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typha_helpers import State, TyphaProcess, eventually

from calico.api.io import parse_resource
from calico.datastore.client import Client
from calico.datastore.config import DatastoreConfig
from calico.datastore.factory import open_backend
from calico.model.values import encode_value
from calico.syncer import DedupeBuffer
from calico.syncer.api import SyncStatus
from calico.syncer.definitions import felix_syncer
from calico.syncer.typhaclient import ClientSettings, SyncClient

PROG = str(Path(__file__).with_name("typha_client_prog.py"))
IN_PROCESS = 50
PROCESSES = 3


def profile(i: int, rev: str = "a") -> dict[str, Any]:
    return {
        "kind": "Profile",
        "metadata": {"name": f"prof-{i}"},
        "spec": {
            "ingress": [{"action": "Allow", "source": {"selector": f"app == '{rev}{i}'"}}],
            "labelsToApply": {"p": str(i)},
        },
    }


def policy(i: int) -> dict[str, Any]:
    return {
        "kind": "GlobalNetworkPolicy",
        "metadata": {"name": f"gnp-{i}"},
        "spec": {
            "order": i,
            "selector": f"role == 'r{i}'",
            "ingress": [{"action": "Allow", "protocol": "TCP", "destination": {"ports": [80 + i]}}],
        },
    }


def wep(i: int) -> dict[str, Any]:
    return {
        "kind": "WorkloadEndpoint",
        "metadata": {"name": f"node1-k8s-pod{i}-eth0", "namespace": "ns1", "labels": {"app": "x"}},
        "spec": {
            "orchestrator": "k8s",
            "workload": f"pod{i}",
            "pod": f"pod{i}",
            "node": "node1",
            "endpoint": "eth0",
            "interfaceName": f"cali{i:011d}",
            "ipNetworks": [f"10.65.{i // 250}.{i % 250 + 1}/32"],
            "profiles": ["kns.ns1"],
        },
    }


NODE = {
    "kind": "Node",
    "metadata": {"name": "node1"},
    "spec": {"bgp": {"ipv4Address": "10.0.0.1/24"}},
}
POOL = {"kind": "IPPool", "metadata": {"name": "pool1"}, "spec": {"cidr": "10.65.0.0/16"}}


class Store:
    def __init__(self, config: DatastoreConfig) -> None:
        self.backend = open_backend(config)
        self.client = Client(self.backend)
        self.client.ensure_initialized("test")

    def apply(self, doc: dict[str, Any]) -> None:
        self.client.apply(parse_resource({"apiVersion": "projectcalico.org/v3", **doc}))

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        self.client.delete(kind, name, namespace)

    def expected(self) -> dict[str, Any]:
        """What a direct felix syncer over the same datastore ends up with (path -> v1 JSON)."""
        st = State()
        syncer = felix_syncer(self.backend, st)
        syncer.start()
        try:
            st.wait(lambda s: s.status is SyncStatus.IN_SYNC, timeout=30)
            with st.cond:
                return encoded(st.state)
        finally:
            syncer.stop()


def encoded(state: dict[Any, Any]) -> dict[str, Any]:
    return {k.default_path(): encode_value(k, v) for k, v in state.items()}


@pytest.fixture(params=["local", "etcdv3"])
def store_and_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, dict]]:
    if request.param == "local":
        path = str(tmp_path / "calico.db")
        env = {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": path}
        store = Store(DatastoreConfig(local_path=path))
        try:
            yield store, env
        finally:
            store.backend.close()
        return
    import shutil

    from calico.datastore.etcd.server import ETCD_BINARY, EtcdServer

    if shutil.which(ETCD_BINARY) is None:
        pytest.skip("no etcd binary")
    server = EtcdServer()  # our own: Typha reads the real /calico prefixes
    server.start()
    try:
        endpoints = server.endpoints
        store = Store(DatastoreConfig(datastore_type="etcdv3", etcd_endpoints=(endpoints,)))
        try:
            yield store, {"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": endpoints}
        finally:
            store.backend.close()
    finally:
        server.cleanup()


def populate(store: Store, n: int) -> None:
    store.apply(NODE)
    store.apply(POOL)
    for i in range(n):
        store.apply(profile(i))
        store.apply(policy(i))
        store.apply(wep(i))


def test_many_clients_converge_and_survive_a_restart(
    store_and_env: tuple[Store, dict], tmp_path: Path
) -> None:
    store, env = store_and_env
    populate(store, 40)
    typha = TyphaProcess(tmp_path, env)
    typha.start()
    clients: list[SyncClient] = []
    buffers: list[DedupeBuffer] = []
    procs: list[subprocess.Popen[str]] = []
    try:
        typha.wait_ready()
        states = [State() for _ in range(IN_PROCESS)]
        for st in states:
            buf = DedupeBuffer(st)
            buf.start()
            buffers.append(buf)
            clients.append(SyncClient(ClientSettings(typha.addr, hostname="t"), buf))
        for c in clients:
            c.start()
        outs = [tmp_path / f"client-{i}.json" for i in range(PROCESSES)]
        procs = [
            subprocess.Popen(
                [sys.executable, PROG, typha.addr, str(o)], stdout=subprocess.PIPE, text=True
            )
            for o in outs
        ]
        expected = store.expected()
        assert len(expected) > 120
        for st in states:
            st.wait(lambda s: s.status is SyncStatus.IN_SYNC and encoded_now(s) == expected, 60)
        total = IN_PROCESS + PROCESSES
        eventually(lambda: typha.metric('typha_connections_streaming{syncer="felix"}') == total, 30)
        assert typha.metric("typha_connections_accepted") == total
        assert typha.metric('typha_cache_size{syncer="felix"}') == len(expected)

        # Restart Typha; meanwhile delete, add and change resources.
        assert typha.stop() == 0
        assert "Server has shut down." in typha.log_path(1).read_text()
        for i in range(0, 40, 4):
            store.delete("Profile", f"prof-{i}")
            store.delete("WorkloadEndpoint", f"node1-k8s-pod{i}-eth0", "ns1")
        for i in range(1, 40, 4):
            store.apply(profile(i, rev="b"))
        for i in range(40, 45):
            store.apply(policy(i))
        store.delete("Node", "node1")
        typha.start()
        typha.wait_ready()
        expected2 = store.expected()
        assert expected2 != expected
        removed = set(expected) - set(expected2)
        assert len(removed) > 20
        for st in states:
            st.wait(lambda s: s.status is SyncStatus.IN_SYNC and encoded_now(s) == expected2, 60)
        assert all(c.connections == 2 for c in clients)
        eventually(lambda: typha.metric("typha_connections_accepted") == total, 30)
        for p in procs:
            p.terminate()
        for p, out in zip(procs, outs, strict=True):
            assert p.wait(20) == 0
            result = json.loads(out.read_text())
            assert result["status"] == "in-sync" and result["connections"] == 2
            assert result["state"] == json.loads(json.dumps(expected2))
    finally:
        for c in clients:
            c.stop(2)
        for b in buffers:
            b.stop(2)
        for p in procs:
            if p.poll() is None:
                p.kill()
        typha.kill()


def encoded_now(st: State) -> dict[str, Any]:
    return encoded(st.state)  # called under st.cond by State.wait
