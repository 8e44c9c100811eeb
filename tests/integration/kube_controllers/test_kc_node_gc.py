"""The node controller's IPAM GC against the fake API server (Kubernetes datastore): node
deletion frees exactly that node's addresses, leaks wait out the grace period, and the
controller keeps working across dropped watches, 410s and an API server outage."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

import pytest
from k8s_fake_apiserver import FakeAPIServer
from kc_support import add_node, add_pod, add_pool, kdd_config, set_pod_status, wait_for

from calico.datastore.client import Client
from calico.datastore.factory import open_backend
from calico.ipam import IPAMClient
from calico.kube_controllers.ipamgc import IPAMGarbageCollector
from calico.kube_controllers.kubecache import KubeCache
from calico.kube_controllers.metrics import IPAMMetrics
from calico.kube_controllers.node import NodeController


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def world() -> Iterator[dict[str, Any]]:
    with FakeAPIServer(bookmark_interval=0.2) as api:
        backend = open_backend(kdd_config(api))
        client = Client(backend)
        add_pool(client, "pool1", "10.0.0.0/16", block_size=29)
        kube = KubeCache(backend)
        kube.start()
        clock = Clock()
        ipam = IPAMClient(client)
        gc = IPAMGarbageCollector(ipam, leak_grace_period=60.0, clock=clock)
        metrics = IPAMMetrics()
        ctrl = NodeController(
            client,
            kube,
            gc,
            kubernetes_datastore=True,
            sync_labels=False,
            auto_host_endpoints=False,
            metrics=metrics,
        )
        try:
            yield {
                "api": api,
                "client": client,
                "ipam": ipam,
                "kube": kube,
                "ctrl": ctrl,
                "clock": clock,
                "metrics": metrics,
            }
        finally:
            kube.stop()
            backend.close()


def _assign(ipam: IPAMClient, node: str, ns: str, pod: str) -> str:
    v4, _ = ipam.auto_assign(
        1, 0, f"k8s-pod-network.{pod}", {"node": node, "namespace": ns, "pod": pod}, node
    )
    return str(v4[0].ip)


def _allocated(ipam: IPAMClient) -> set[str]:
    out = set()
    for stored in ipam.store.list_blocks():
        b = stored.block
        for o in range(b.size):
            attr = b.attr_of(o)
            if attr is not None and attr.released_at is None:
                out.add(str(b.ip(o)))
    return out


def _in_sync_with(kube: KubeCache, pods: int, nodes: int) -> bool:
    return (
        kube.in_sync
        and len(kube.snapshot("WorkloadEndpoint")) == pods
        and (len(kube.node_names()) == nodes)
    )


def test_node_deletion_frees_every_address_of_that_node_and_nothing_else(
    world: dict[str, Any],
) -> None:
    api, ipam, kube, ctrl = world["api"], world["ipam"], world["kube"], world["ctrl"]
    for node in ("node-a", "node-b"):
        add_node(api, node)
    ips: dict[str, list[str]] = {"node-a": [], "node-b": []}
    for i in range(14):  # /29 blocks: node-a spans two of them
        node = "node-a" if i % 3 else "node-b"
        ip = _assign(ipam, node, "ns1", f"pod{i}")
        add_pod(api, "ns1", f"pod{i}", node, ip)
        ips[node].append(ip)
    # node-b's pod holding an address borrowed from node-a's second block
    a_block = ipaddress.ip_network(ips["node-a"][-1] + "/29", strict=False)
    spare = str(a_block.network_address + 7)
    ipam.assign_ip(
        spare,
        "k8s-pod-network.borrow",
        {"node": "node-b", "namespace": "ns1", "pod": "borrow"},
        "node-b",
    )
    add_pod(api, "ns1", "borrow", "node-b", spare)
    ips["node-b"].append(spare)
    tunnel, _ = ipam.auto_assign(
        1, 0, "ipip-tunnel-addr-node-a", {"node": "node-a", "type": "ipipTunnelAddress"}, "node-a"
    )
    ips["node-a"].append(str(tunnel[0].ip))
    wait_for(lambda: _in_sync_with(kube, 15, 2), what="initial sync")
    result = ctrl.reconcile()
    assert result is not None and result.released == []  # everything alive
    assert _allocated(ipam) == set(ips["node-a"]) | set(ips["node-b"])

    api.delete_object("v1", "nodes", "node-a")
    wait_for(lambda: kube.node_names() == {"node-b"}, what="node deletion seen")
    result = ctrl.reconcile()
    assert sorted(result.released) == sorted(ips["node-a"])  # no grace period for dead nodes
    assert _allocated(ipam) == set(ips["node-b"])
    assert {a.spec.node for a in ipam.store.list_affinities()} == {"node-b"}
    # node-a's blocks are gone except the one still holding node-b's borrowed address
    hosts = {str(s.block.cidr): s.block.host() for s in ipam.store.list_blocks()}
    borrowed_block = next(
        c for c in hosts if ipaddress.ip_address(ips["node-b"][-1]) in ipaddress.ip_network(c)
    )
    assert "node-a" not in hosts.values()
    assert hosts[borrowed_block] in (None, "node-b")
    m = world["metrics"].registry
    assert m.get_sample_value(
        "ipam_allocations_gc_reclamations", {"ippool": "pool1", "node": "node-a"}
    ) == len(ips["node-a"])
    assert m.get_sample_value(
        "ipam_allocations_in_use", {"ippool": "pool1", "node": "node-b"}
    ) == len(ips["node-b"])
    assert ctrl.reconcile().released == []  # idempotent


def test_leaked_ip_released_only_after_the_grace_period(world: dict[str, Any]) -> None:
    api, ipam, kube, ctrl, clock = (world[k] for k in ("api", "ipam", "kube", "ctrl", "clock"))
    add_node(api, "node-a")
    live = _assign(ipam, "node-a", "ns1", "live")
    add_pod(api, "ns1", "live", "node-a", live)
    leaked = _assign(ipam, "node-a", "ns1", "gone")  # CNI DEL never ran: no pod
    wrong = _assign(ipam, "node-a", "ns1", "moved")
    add_pod(api, "ns1", "moved", "node-a", "10.9.9.9")  # the pod exists with another IP
    wait_for(lambda: _in_sync_with(kube, 2, 1), what="sync")
    assert ctrl.reconcile().candidates == 2
    m = world["metrics"].registry
    assert (
        m.get_sample_value("ipam_allocations_gc_candidates", {"ippool": "pool1", "node": "node-a"})
        == 2
    )
    clock.now += 59.9
    assert ctrl.reconcile().released == []
    clock.now += 0.1  # exactly the grace period
    assert sorted(ctrl.reconcile().released) == sorted([leaked, wrong])
    assert _allocated(ipam) == {live}
    assert (
        m.get_sample_value("ipam_allocations_gc_candidates", {"ippool": "pool1", "node": "node-a"})
        is None
    )


def test_candidate_that_reappears_is_not_released(world: dict[str, Any]) -> None:
    api, ipam, kube, ctrl, clock = (world[k] for k in ("api", "ipam", "kube", "ctrl", "clock"))
    add_node(api, "node-a")
    ip = _assign(ipam, "node-a", "ns1", "slow")  # pod status not written yet
    add_pod(api, "ns1", "slow", "node-a", None)
    wait_for(lambda: _in_sync_with(kube, 1, 1), what="sync")
    assert ctrl.reconcile().candidates == 1
    clock.now += 30
    set_pod_status(api, "ns1", "slow", {"podIP": ip})
    wait_for(lambda: kube.pod_ips().get(("ns1", "slow")) == {ip}, what="pod IP seen")
    assert ctrl.reconcile().candidates == 0
    set_pod_status(api, "ns1", "slow", {})
    wait_for(lambda: not kube.pod_ips().get(("ns1", "slow")), what="pod IP gone")
    clock.now += 40  # 70 s after it was first a candidate: the clock starts again now
    assert ctrl.reconcile().released == []
    clock.now += 59.9
    assert ctrl.reconcile().released == []
    clock.now += 0.1
    assert ctrl.reconcile().released == [ip]


def test_zero_grace_period_disables_leak_collection(world: dict[str, Any]) -> None:
    api, ipam, kube, ctrl, clock = (world[k] for k in ("api", "ipam", "kube", "ctrl", "clock"))
    ctrl.gc.grace = 0.0
    add_node(api, "node-a")
    ip = _assign(ipam, "node-a", "ns1", "gone")
    wait_for(lambda: _in_sync_with(kube, 0, 1), what="sync")
    clock.now += 10**6
    assert ctrl.reconcile().released == []
    assert _allocated(ipam) == {ip}


def test_keeps_working_through_disconnects_410s_and_an_outage(world: dict[str, Any]) -> None:
    api, ipam, kube, ctrl = world["api"], world["ipam"], world["kube"], world["ctrl"]
    for node in ("node-a", "node-b", "node-c"):
        add_node(api, node)
    a = _assign(ipam, "node-a", "ns1", "pa")
    add_pod(api, "ns1", "pa", "node-a", a)
    b = _assign(ipam, "node-b", "ns1", "pb")
    add_pod(api, "ns1", "pb", "node-b", b)
    c = _assign(ipam, "node-c", "ns1", "pc")
    add_pod(api, "ns1", "pc", "node-c", c)
    wait_for(lambda: _in_sync_with(kube, 3, 3), what="sync")

    api.drop_watches()
    api.delete_object("v1", "nodes", "node-a")
    wait_for(lambda: kube.node_names() == {"node-b", "node-c"}, what="delete after drop")
    assert ctrl.reconcile().released == [a]

    api.expire_next_watches(10)
    api.drop_watches()
    api.delete_object("v1", "nodes", "node-b")  # seen through the relist after the 410
    wait_for(lambda: kube.in_sync and kube.node_names() == {"node-c"}, what="relist after 410")
    assert ctrl.reconcile().released == [b]

    api.outage(1.0)
    api.delete_object("v1", "nodes", "node-c")
    wait_for(lambda: kube.in_sync and not kube.node_names(), timeout=20, what="after outage")
    assert ctrl.reconcile().released == [c]
    assert _allocated(ipam) == set()


def test_nothing_released_while_the_kubernetes_view_is_not_in_sync(
    world: dict[str, Any],
) -> None:
    ipam, kube, ctrl = world["ipam"], world["kube"], world["ctrl"]
    _assign(ipam, "node-a", "ns1", "p")  # node-a not (yet) listed
    wait_for(lambda: kube.in_sync, what="sync")
    kube.status = kube.status.__class__.RESYNC_IN_PROGRESS
    assert ctrl.reconcile() is None
    assert len(_allocated(ipam)) == 1


def test_a_stopping_view_never_looks_like_deleted_nodes(world: dict[str, Any]) -> None:
    """The syncer's closing synthetic deletes must not reach the controller."""
    api, ipam, kube, ctrl = world["api"], world["ipam"], world["kube"], world["ctrl"]
    add_node(api, "node-a")
    ip = _assign(ipam, "node-a", "ns1", "p")
    add_pod(api, "ns1", "p", "node-a", ip)
    wait_for(lambda: _in_sync_with(kube, 1, 1), what="sync")
    kube.stop()
    assert not kube.in_sync
    assert kube.node_names() == {"node-a"}
    assert ctrl.reconcile() is None
    assert _allocated(ipam) == {ip}
