"""Host-local IPAM (``USE_POD_CIDR``) over the Kubernetes backend: the felix syncer turns
the Nodes' pod CIDRs into blocks (and ignores IPAM blocks), and Felix's route resolver makes
VXLAN routes to the other nodes' pod CIDRs out of them, following podCIDR changes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from k8s_fake_apiserver import FakeAPIServer

from calico.api import parse_resource
from calico.datastore.client import Client
from calico.datastore.config import DatastoreConfig
from calico.datastore.kubernetes import KubernetesBackend
from calico.felix.calc.fanout import TypeFanout
from calico.felix.calc.l3_route_resolver import L3RouteResolver
from calico.felix.messages import IPPoolType, RouteType, RouteUpdate
from calico.model import BlockKey, HostConfigKey
from calico.syncer.api import SyncStatus, Update
from calico.syncer.definitions import felix_syncer

CRD = "crd.projectcalico.org/v1"
POOL = {
    "apiVersion": "projectcalico.org/v3",
    "kind": "IPPool",
    "metadata": {"name": "pods"},
    "spec": {"cidr": "10.244.0.0/16", "vxlanMode": "Always", "ipipMode": "Never"},
}
IPAM_BLOCK = {
    "apiVersion": "projectcalico.org/v3",
    "kind": "IPAMBlock",
    "metadata": {"name": "10-99-0-0-26"},
    "spec": {
        "cidr": "10.99.0.0/26",
        "affinity": "host:node2",
        "allocations": [None] * 64,
        "unallocated": list(range(64)),
        "attributes": [],
    },
}


def _node(name: str, ip: str, pod_cidrs: list[str]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "annotations": {
                "projectcalico.org/IPv4Address": f"{ip}/24",
                "projectcalico.org/IPv4VXLANTunnelAddr": pod_cidrs[0].replace(".0/24", ".2"),
            },
        },
        "spec": {"podCIDR": pod_cidrs[0], "podCIDRs": pod_cidrs},
    }


class _Felix:
    """A felix syncer client: the syncer's state plus the routes an L3RouteResolver for
    ``node1`` makes of it (fed live, as the calc graph is)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.values: dict[Any, Any] = {}
        self.routes: dict[str, RouteUpdate] = {}
        self.in_sync = False
        self.fanout = TypeFanout()
        L3RouteResolver(self, "node1").register(self.fanout)

    def on_status_updated(self, status: Any) -> None:
        with self.lock:
            self.in_sync = self.in_sync or status is SyncStatus.IN_SYNC

    def on_updates(self, updates: list[Update]) -> None:
        with self.lock:
            for u in updates:
                if u.value is None:
                    self.values.pop(u.key, None)
                else:
                    self.values[u.key] = u.value
                self.fanout.on_update(u.key, u.value)

    def on_route_update(self, update: RouteUpdate) -> None:
        self.routes[update.dst] = update

    def on_route_remove(self, dst: str) -> None:
        del self.routes[dst]

    def blocks(self) -> dict[str, Any]:
        with self.lock:
            return {str(k.cidr): v for k, v in self.values.items() if isinstance(k, BlockKey)}

    def route(self, dst: str) -> RouteUpdate | None:
        with self.lock:
            return self.routes.get(dst)


def _wait(pred: Any, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def api() -> Iterator[FakeAPIServer]:
    with FakeAPIServer(bookmark_interval=0.5) as server:
        server.put_object("v1", "nodes", _node("node1", "192.168.0.1", ["10.244.1.0/24"]))
        server.put_object(
            "v1", "nodes", _node("node2", "192.168.0.2", ["10.244.2.0/24", "fd00:2::/64"])
        )
        yield server


def _run(api: FakeAPIServer, use_pod_cidr: bool) -> tuple[KubernetesBackend, Any, _Felix]:
    extra = {"k8sAPIEndpoint": api.url, "usePodCIDR": use_pod_cidr}
    backend = KubernetesBackend(DatastoreConfig("kubernetes", extra=extra))
    client = Client(backend)
    for doc in (POOL, IPAM_BLOCK):
        client.create(parse_resource(doc))
    felix = _Felix()
    syncer = felix_syncer(backend, felix)
    syncer.start()
    assert _wait(lambda: felix.in_sync)
    return backend, syncer, felix


def _remote(dst: str) -> RouteUpdate:
    return RouteUpdate(
        dst,
        frozenset({RouteType.REMOTE_WORKLOAD}),
        ip_pool_type=IPPoolType.VXLAN,
        dst_node_name="node2",
        dst_node_ip="192.168.0.2",
    )


def test_calico_ipam_mode_uses_ipam_blocks_not_pod_cidrs(api: FakeAPIServer) -> None:
    backend, syncer, felix = _run(api, use_pod_cidr=False)
    try:
        assert _wait(lambda: "10.99.0.0/26" in felix.blocks())
        assert set(felix.blocks()) == {"10.99.0.0/26"}
    finally:
        syncer.stop()
        backend.close()


def test_pod_cidr_mode_routes_follow_node_pod_cidrs(api: FakeAPIServer) -> None:
    backend, syncer, felix = _run(api, use_pod_cidr=True)
    try:
        want = {"10.244.1.0/24", "10.244.2.0/24", "fd00:2::/64"}
        assert _wait(lambda: set(felix.blocks()) == want), felix.blocks()
        # (The IPAM block 10.99.0.0/26 in the API is not watched at all in this mode.)
        assert felix.blocks()["10.244.2.0/24"].affinity == "host:node2"
        assert felix.blocks()["10.244.2.0/24"].allocations == ()
        with felix.lock:
            tunnel = felix.values[HostConfigKey("node1", "IpInIpTunnelAddr")]
        assert tunnel == "10.244.1.1"  # derived from node1's podCIDR
        assert _wait(lambda: felix.route("10.244.2.0/24") == _remote("10.244.2.0/24")), felix.routes
        # node2's host-local IPIP tunnel address (from its podCIDR) is routed to node2 too.
        tunnel2 = felix.route("10.244.2.1/32")
        assert tunnel2 is not None and tunnel2.types == {RouteType.REMOTE_TUNNEL}
        assert tunnel2.dst_node_name == "node2"
        local = felix.route("10.244.1.0/24")
        assert local is not None and RouteType.LOCAL_WORKLOAD in local.types

        # node2's pod CIDR is reassigned: the old block and route go, the new ones come.
        node2 = api.get_object("v1", "nodes", "node2")
        node2["spec"]["podCIDRs"] = ["10.244.7.0/24"]
        node2["spec"]["podCIDR"] = "10.244.7.0/24"
        api.update_object("v1", "nodes", node2)
        want = {"10.244.1.0/24", "10.244.7.0/24"}
        assert _wait(lambda: set(felix.blocks()) == want), felix.blocks()
        assert _wait(lambda: felix.route("10.244.7.0/24") == _remote("10.244.7.0/24"))
        assert felix.route("10.244.2.0/24") is None

        # A deleted Node takes its blocks (and routes) with it.
        api.delete_object("v1", "nodes", "node2")
        assert _wait(lambda: set(felix.blocks()) == {"10.244.1.0/24"}), felix.blocks()
        assert _wait(lambda: felix.route("10.244.7.0/24") is None)
    finally:
        syncer.stop()
        backend.close()
