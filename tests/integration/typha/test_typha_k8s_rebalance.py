"""Kubernetes connection rebalancing end to end: a real Typha process (local datastore with one
Node) with ``ConnectionRebalancingMode=kubernetes`` polling the fake API server's
EndpointSlices. A second Typha endpoint lowers the limit and the governor sheds connections
down to it; API errors put the upper limit back (design/typha.md "Connection rebalancing")."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from k8s_fake_apiserver import ApiError, FakeAPIServer
from typha_helpers import State, TyphaProcess, eventually

from calico.api.io import parse_resource
from calico.datastore.client import Client
from calico.datastore.config import DatastoreConfig
from calico.datastore.factory import open_backend
from calico.syncer.typhaclient import ClientSettings, SyncClient

UPPER, LOWER = 12, 2  # 2 Typhas, 1 node: 4 * (1 + 1*120 // 1 // 100) = 8


def endpoint_slice(name: str, address: str, port_name: str = "calico-typha") -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": "kube-system",
            "labels": {"kubernetes.io/service-name": "calico-typha"},
        },
        "addressType": "IPv4",
        "ports": [{"name": port_name, "port": 5473, "protocol": "TCP"}],
        "endpoints": [{"addresses": [address], "conditions": {"ready": False}}],
    }


class SliceLists:
    """Counts the API server's EndpointSlice lists (polls) and can make them fail."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.count = 0
        self.failing = False

    def __call__(self, res: Any) -> None:
        if res.plural != "endpointslices":
            return
        with self.cond:
            self.count += 1
            self.cond.notify_all()
            failing = self.failing
        if failing:
            raise ApiError(500, "InternalError", "etcd is sulking")

    def wait_more(self, n: int, timeout: float = 30.0) -> None:
        with self.cond:
            target = self.count + n
            assert self.cond.wait_for(lambda: self.count >= target, timeout), "no polls"


def test_second_typha_lowers_the_limit_and_errors_restore_the_upper(tmp_path: Path) -> None:
    db = str(tmp_path / "calico.db")
    backend = open_backend(DatastoreConfig(local_path=db))
    client = Client(backend)
    client.ensure_initialized("test")
    client.apply(parse_resource({"apiVersion": "projectcalico.org/v3", "kind": "Node",
                                 "metadata": {"name": "node1"}, "spec": {}}))  # fmt: skip
    backend.close()

    api = FakeAPIServer().start()
    polls = SliceLists()
    api.on_list(polls)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: '{api.url}'}}}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    api.put_object("discovery.k8s.io/v1", "endpointslices", endpoint_slice("t-a", "10.0.0.1"))
    # another service's slice and a slice without the port name: neither is a Typha
    other = endpoint_slice("t-x", "10.0.0.9", port_name="metrics")
    api.put_object("discovery.k8s.io/v1", "endpointslices", other)

    typha = TyphaProcess(
        tmp_path,
        {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": db, "KUBECONFIG": str(kubeconfig)},
        ConnectionRebalancingMode="kubernetes",
        K8sServicePollIntervalSecs="0.3",
        ConnectionDropIntervalSecs="0.2",
        MaxConnectionsUpperLimit=str(UPPER),
        MaxConnectionsLowerLimit=str(LOWER),
    )
    typha.start()
    clients: list[SyncClient] = []

    def changes(text: str) -> int:  # the whole log: typha.log() is only its tail
        return typha.log_path().read_text().count(f"max connections {text}")

    def connect(n: int) -> None:
        for _ in range(n):
            c = SyncClient(ClientSettings(typha.addr), State())  # not restart-aware: stays gone
            c.start()
            clients.append(c)

    try:
        typha.wait_ready()
        connect(10)
        eventually(lambda: typha.metric("typha_connections_active") == 10, timeout=30)
        polls.wait_more(3)  # a lone Typha keeps the upper limit: nothing dropped
        assert typha.metric("typha_connections_dropped") == 0
        assert changes("") == 0

        api.put_object("discovery.k8s.io/v1", "endpointslices", endpoint_slice("t-b", "10.0.0.2"))
        eventually(lambda: changes("12 -> 8") == 1, timeout=30)
        eventually(lambda: typha.metric("typha_connections_active") == 8, timeout=30)
        polls.wait_more(3)  # several polls and governor ticks later: still exactly at the limit
        assert typha.metric("typha_connections_active") == 8
        assert typha.metric("typha_connections_dropped") == 2
        eventually(lambda: sum(c.finished.is_set() for c in clients) == 2)

        with polls.cond:
            polls.failing = True
        eventually(lambda: changes("8 -> 12") == 1, timeout=30)
        assert "cannot list Typha endpoint slices" in typha.log()
        connect(4)  # room for the upper limit again
        eventually(lambda: typha.metric("typha_connections_accepted") == 14, timeout=30)
        eventually(lambda: typha.metric("typha_connections_active") == 12, timeout=30)
        polls.wait_more(3)
        assert typha.metric("typha_connections_active") == 12
        assert typha.metric("typha_connections_dropped") == 2

        with polls.cond:
            polls.failing = False
        eventually(lambda: changes("12 -> 8") == 2, timeout=30)
        eventually(lambda: typha.metric("typha_connections_active") == 8, timeout=30)
        assert typha.metric("typha_connections_dropped") == 6
        assert changes("") == 3  # applied only on change
        assert typha.stop() == 0
    finally:
        for c in clients:
            c.stop()
        typha.kill()
        api.stop()
