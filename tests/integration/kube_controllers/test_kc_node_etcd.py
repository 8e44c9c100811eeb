"""The node controller in etcd mode: Kubernetes nodes in the fake API server, Calico Nodes,
host endpoints and IPAM in a real etcd. Label sync, auto host endpoints, Calico Node deletion
with its addresses, and idempotence."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from etcd_fixture import make_etcd_backend
from k8s_fake_apiserver import FakeAPIServer
from kc_support import add_node, add_pool, kdd_config, wait_for

from calico.api import parse_resource
from calico.datastore.client import Client
from calico.datastore.factory import open_backend
from calico.ipam import IPAMClient
from calico.kube_controllers.ipamgc import IPAMGarbageCollector
from calico.kube_controllers.kubecache import KubeCache
from calico.kube_controllers.node import CREATED_BY, KUBE_LABELS, NodeController


def _calico_node(name: str, k8s: bool, labels: dict[str, str], ip: str) -> Any:
    spec: dict[str, Any] = {"bgp": {"ipv4Address": f"{ip}/24"}}
    if k8s:
        spec["orchRefs"] = [{"nodeName": name, "orchestrator": "k8s"}]
    return parse_resource(
        {
            "apiVersion": "projectcalico.org/v3",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
        }
    )


@pytest.fixture
def world(etcd_server: Any) -> Iterator[dict[str, Any]]:
    with FakeAPIServer(bookmark_interval=0.2) as api:
        kube_backend = open_backend(kdd_config(api))
        calico = Client(make_etcd_backend(etcd_server.endpoints, f"/kcn-{uuid.uuid4().hex[:12]}"))
        add_pool(calico, "pool1", "10.0.0.0/16", block_size=29)
        kube = KubeCache(kube_backend)
        kube.start()
        ipam = IPAMClient(calico)
        ctrl = NodeController(
            calico,
            kube,
            IPAMGarbageCollector(ipam, 60.0),
            kubernetes_datastore=False,
            sync_labels=True,
            auto_host_endpoints=True,
        )
        try:
            yield {"api": api, "calico": calico, "kube": kube, "ipam": ipam, "ctrl": ctrl}
        finally:
            kube.stop()
            kube_backend.close()


def _heps(calico: Client) -> dict[str, Any]:
    return {h.metadata.name: h for h in calico.list("HostEndpoint").items}


def _revisions(calico: Client) -> dict[str, str]:
    out = {}
    for kind in ("Node", "HostEndpoint"):
        for r in calico.list(kind).items:
            out[f"{kind}/{r.metadata.name}"] = r.metadata.resource_version
    return out


def test_labels_heps_and_node_deletion(world: dict[str, Any]) -> None:
    api, calico, kube, ipam, ctrl = (world[k] for k in ("api", "calico", "kube", "ipam", "ctrl"))
    add_node(api, "node-a", {"zone": "z1", "rack": "r1"})
    add_node(api, "node-b", {})
    calico.create(
        _calico_node("node-a", True, {"calico-only": "yes", "zone": "old"}, "192.168.1.1")
    )
    calico.create(_calico_node("node-b", True, {}, "192.168.1.2"))
    calico.create(_calico_node("bare", False, {"metal": "true"}, "192.168.1.3"))
    user_hep = parse_resource(
        {
            "apiVersion": "projectcalico.org/v3",
            "kind": "HostEndpoint",
            "metadata": {"name": "mine"},
            "spec": {"node": "bare", "interfaceName": "eth0"},
        }
    )
    calico.create(user_hep)
    a_ip, _ = ipam.auto_assign(
        1, 0, "h-a", {"node": "node-a", "namespace": "x", "pod": "p"}, "node-a"
    )
    bare_ip, _ = ipam.auto_assign(1, 0, "h-bare", {"node": "bare"}, "bare")
    wait_for(lambda: kube.in_sync and len(kube.node_names()) == 2, what="sync")
    ctrl.gc.grace = 0.0  # the pod does not exist; only node deletion may free it

    ctrl.reconcile()
    node_a = calico.get("Node", "node-a")
    assert node_a.metadata.labels == {"calico-only": "yes", "zone": "z1", "rack": "r1"}
    assert json.loads(node_a.metadata.annotations[KUBE_LABELS]) == {"zone": "z1", "rack": "r1"}
    assert calico.get("Node", "bare").metadata.labels == {"metal": "true"}  # not Kubernetes'
    heps = _heps(calico)
    assert set(heps) == {"mine", "node-a-auto-hep", "node-b-auto-hep", "bare-auto-hep"}
    auto_a = heps["node-a-auto-hep"]
    assert auto_a.spec.node == "node-a"
    assert auto_a.spec.interface_name == "*"
    assert auto_a.spec.expected_ips == ["192.168.1.1"]
    assert auto_a.metadata.labels == {
        "calico-only": "yes",
        "zone": "z1",
        "rack": "r1",
        CREATED_BY: "calico-kube-controllers",
    }
    before = _revisions(calico)
    ctrl.reconcile()
    assert _revisions(calico) == before  # idempotent: nothing rewritten

    # a Kubernetes label changes and one goes away: Calico-only labels stay
    node = api.get_object("v1", "nodes", "node-a")
    node["metadata"]["labels"] = {"zone": "z2"}
    api.update_object("v1", "nodes", node)
    wait_for(
        lambda: (
            ("", "node-a") in kube.snapshot("Node")
            and '"z2"'
            in kube.snapshot("Node")[("", "node-a")]["metadata"]["annotations"][KUBE_LABELS]
        ),
        what="label change seen",
    )
    ctrl.reconcile()
    assert calico.get("Node", "node-a").metadata.labels == {"calico-only": "yes", "zone": "z2"}
    assert _heps(calico)["node-a-auto-hep"].metadata.labels["zone"] == "z2"

    api.delete_object("v1", "nodes", "node-a")
    wait_for(lambda: kube.node_names() == {"node-b"}, what="deletion seen")
    result = ctrl.reconcile()
    assert {n.metadata.name for n in calico.list("Node").items} == {"node-b", "bare"}
    assert set(_heps(calico)) == {"mine", "node-b-auto-hep", "bare-auto-hep"}
    assert result is not None and result.released == [str(a_ip[0].ip)]
    assert ipam.get_assignment_attributes(str(bare_ip[0].ip))[0] == "h-bare"

    ctrl.auto_heps = False  # disabled: ours are removed, the user's stays
    ctrl.reconcile()
    assert set(_heps(calico)) == {"mine"}


def test_auto_hep_expected_ips_and_what_triggers_an_update(world: dict[str, Any]) -> None:
    api, calico, kube, ctrl = (world[k] for k in ("api", "calico", "kube", "ctrl"))
    add_node(api, "rich", {})
    wait_for(lambda: kube.in_sync and kube.node_names() == {"rich"}, what="sync")
    node = {
        "apiVersion": "projectcalico.org/v3",
        "kind": "Node",
        "metadata": {"name": "rich"},
        "spec": {
            "orchRefs": [{"nodeName": "rich", "orchestrator": "k8s"}],
            "bgp": {
                "ipv4Address": "192.168.5.5/24",
                "ipv6Address": "fd00::5/64",
                "ipv4IPIPTunnelAddr": "10.0.1.1",
            },
            "ipv4VXLANTunnelAddr": "10.0.2.1",
            "ipv6VXLANTunnelAddr": "fd10::1",
            "wireguard": {"interfaceIPv4Address": "10.0.3.1", "interfaceIPv6Address": "fd20::1"},
            "addresses": [
                {"address": "192.168.5.5", "type": "InternalIP"},  # already listed (BGP)
                {"address": "172.16.0.9", "type": "InternalIP"},
                {"address": "203.0.113.9", "type": "ExternalIP"},
            ],
        },
    }
    calico.create(parse_resource(node))
    ctrl.reconcile()
    hep = _heps(calico)["rich-auto-hep"]
    # upstream's order; no IPv6 tunnel addresses, no external address, no duplicate
    assert hep.spec.expected_ips == [
        "192.168.5.5",
        "fd00::5",
        "10.0.1.1",
        "10.0.2.1",
        "10.0.3.1",
        "172.16.0.9",
    ]
    assert hep.spec.profiles == ["projectcalico-default-allow"]

    # a profile edited on our endpoint is not a reason to rewrite it (as upstream) ...
    hep.spec.profiles = ["edited"]
    calico.update(hep)
    rev = _heps(calico)["rich-auto-hep"].metadata.resource_version
    ctrl.reconcile()
    assert _heps(calico)["rich-auto-hep"].metadata.resource_version == rev
    # ... but an address change of the node is
    stored = calico.get("Node", "rich")
    stored.spec.ipv4_vxlan_tunnel_addr = "10.0.2.2"
    calico.update(stored)
    ctrl.reconcile()
    hep = _heps(calico)["rich-auto-hep"]
    assert hep.spec.expected_ips is not None and "10.0.2.2" in hep.spec.expected_ips
    assert "10.0.2.1" not in hep.spec.expected_ips


def test_label_sync_writes_only_a_label_change_and_creates_no_nodes(
    world: dict[str, Any],
) -> None:
    api, calico, kube, ctrl = (world[k] for k in ("api", "calico", "kube", "ctrl"))
    ctrl.auto_heps = False
    add_node(api, "same", {"zone": "z1"})
    add_node(api, "orphan", {"zone": "z9"})  # a Kubernetes node without a Calico Node
    calico.create(_calico_node("same", True, {"zone": "z1"}, "192.168.7.1"))
    wait_for(lambda: kube.in_sync and len(kube.node_names()) == 2, what="sync")
    rev = calico.get("Node", "same").metadata.resource_version
    ctrl.reconcile()
    same = calico.get("Node", "same")
    assert same.metadata.resource_version == rev  # labels already equal: no write (upstream)
    assert KUBE_LABELS not in (same.metadata.annotations or {})
    assert {n.metadata.name for n in calico.list("Node").items} == {"same"}  # none created

    node = api.get_object("v1", "nodes", "same")
    node["metadata"]["labels"] = {"zone": "z1", "new": "x"}
    api.update_object("v1", "nodes", node)
    wait_for(
        lambda: (
            '"new"' in kube.snapshot("Node")[("", "same")]["metadata"]["annotations"][KUBE_LABELS]
        ),
        what="label change seen",
    )
    ctrl.reconcile()
    same = calico.get("Node", "same")
    assert same.metadata.labels == {"zone": "z1", "new": "x"}
    assert json.loads(same.metadata.annotations[KUBE_LABELS]) == {"new": "x", "zone": "z1"}
    assert same.spec.bgp is not None and same.spec.bgp.ipv4_address == "192.168.7.1/24"
    assert same.metadata.uid  # the stored server-owned fields survive the raw write
