"""Syncer definitions end to end: v3 resources written through the Client, v1 keys out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from syncer_helpers import Recorder

from calico.api import parse_resource
from calico.datastore.client import Client
from calico.datastore.local import LocalBackend
from calico.model import IPPoolKey
from calico.model.values import encode_value
from calico.syncer.api import SyncStatus
from calico.syncer.definitions import (
    bgp_syncer,
    felix_syncer,
    new_syncer,
    tunnel_ip_allocation_syncer,
)

V3 = "/calico/resources/v3/projectcalico.org/"


def make(kind: str, name: str, spec: dict[str, Any], ns: str | None = None, **meta: Any) -> Any:
    metadata: dict[str, Any] = {"name": name, **meta}
    if ns:
        metadata["namespace"] = ns
    return parse_resource(
        {"apiVersion": "projectcalico.org/v3", "kind": kind, "metadata": metadata, "spec": spec}
    )


@pytest.fixture
def client(tmp_path: Path) -> Any:
    backend = LocalBackend(tmp_path / "calico.db")
    try:
        yield Client(backend)
    finally:
        backend.close()


def populate(c: Client) -> None:
    c.ensure_initialized("v3.30.0", "typha")
    for res in (
        make("FelixConfiguration", "default", {"logSeverityScreen": "Info"}),
        make("FelixConfiguration", "node.node1", {"bpfEnabled": True}),
        make("IPPool", "pool1", {"cidr": "10.65.0.0/16", "vxlanMode": "Always"}),
        make(
            "Node",
            "node1",
            {"bgp": {"ipv4Address": "10.0.0.1/24"}, "ipv4VXLANTunnelAddr": "10.65.0.1"},
        ),
        make("Node", "node2", {"bgp": {"ipv4Address": "10.0.0.2/24"}}),
        make("Profile", "kns.default", {"ingress": [{"action": "Allow"}]}),
        make(
            "WorkloadEndpoint",
            "node1-k8s-nginx--abc-eth0",
            {
                "orchestrator": "k8s",
                "node": "node1",
                "pod": "nginx-abc",
                "endpoint": "eth0",
                "interfaceName": "cali1",
                "ipNetworks": ["10.65.0.5/32"],
                "profiles": ["kns.default"],
            },
            "default",
        ),
        make(
            "WorkloadEndpoint",
            "node1-k8s-pending-eth0",
            {"orchestrator": "k8s", "node": "node1", "interfaceName": "cali2"},
            "default",
        ),
        make("NetworkPolicy", "allow-web", {"selector": "app == 'web'"}, "default"),
        make("GlobalNetworkPolicy", "deny-all", {"selector": "all()"}),
        make("StagedNetworkPolicy", "gone", {"stagedAction": "Delete"}, "default"),
        make("GlobalNetworkSet", "ext", {"nets": ["1.2.3.0/24"]}),
        make("NetworkSet", "inner", {"nets": ["10.1.0.0/16"]}, "default"),
        make("HostEndpoint", "node1-eth0", {"node": "node1", "interfaceName": "eth0"}),
        make("BGPConfiguration", "default", {"asNumber": 64512}),
        make("BGPPeer", "rr", {"peerIP": "10.0.0.9", "asNumber": 64512}),
        make(
            "BlockAffinity",
            "node1-aff",
            {"state": "confirmed", "node": "node1", "cidr": "10.65.1.0/26"},
        ),
        make(
            "BlockAffinity",
            "node2-aff",
            {"state": "confirmed", "node": "node2", "cidr": "10.65.2.0/26"},
        ),
        make(
            "BlockAffinity",
            "node1-pending",
            {"state": "pending", "node": "node1", "cidr": "10.65.3.0/26"},
        ),
        make("CalicoNodeStatus", "node1-status", {"node": "node1", "classes": ["Agent"]}),
    ):
        c.create(res)


def run(syncer: Any, recorder: Recorder) -> dict[str, object]:
    """The consumer's view once in sync, as paths and upstream's v1 JSON."""
    syncer.start()
    try:
        recorder.wait_status(SyncStatus.IN_SYNC)
        with recorder.cond:
            return {k.default_path(): encode_value(k, v) for k, v in recorder.state.items()}
    finally:
        syncer.stop()


def test_felix_syncer_emits_v1_keys(client: Client, recorder: Recorder) -> None:
    populate(client)
    state = run(felix_syncer(client.backend, recorder), recorder)
    assert SyncStatus.IN_SYNC in recorder.statuses()
    assert recorder.errors == []
    assert set(state) == {
        "/calico/v1/Ready",
        "/calico/v1/config/ClusterGUID",
        "/calico/v1/config/ClusterType",
        "/calico/v1/config/CalicoVersion",
        "/calico/v1/config/LogSeverityScreen",
        "/calico/v1/host/node1/config/BPFEnabled",
        "/calico/v1/ipam/v4/pool/10.65.0.0-16",
        "/calico/v1/host/node1/config/IPv4VXLANTunnelAddr",
        V3 + "nodes/node1",
        V3 + "nodes/node2",
        "/calico/v1/policy/profile/kns.default/rules",
        V3 + "profiles/kns.default",
        "/calico/v1/host/node1/workload/k8s/default%2fnginx-abc/endpoint/eth0",
        "/calico/v1/policy/NetworkPolicy/default/allow-web",
        "/calico/v1/policy/GlobalNetworkPolicy//deny-all",
        "/calico/v1/policy/tier/default/metadata",
        "/calico/v1/policy/tier/kube-admin/metadata",
        "/calico/v1/policy/tier/kube-baseline/metadata",
        "/calico/v1/netset/ext",
        "/calico/v1/netset/default%2finner",
        "/calico/v1/host/node1/endpoint/node1-eth0",
        V3 + "bgpconfigurations/default",
        V3 + "bgppeers/rr",
    }
    assert state["/calico/v1/Ready"] is True
    assert state["/calico/v1/host/node1/config/BPFEnabled"] == "true"
    assert state["/calico/v1/policy/NetworkPolicy/default/allow-web"] == {
        "namespace": "default",
        "tier": "default",
        "selector": "(app == 'web') && projectcalico.org/namespace == 'default'",
        "types": ["ingress"],
    }


def test_felix_syncer_follows_changes(client: Client, recorder: Recorder) -> None:
    client.ensure_initialized("v3.30.0")
    syncer = felix_syncer(client.backend, recorder)
    syncer.start()
    try:
        recorder.wait_status(SyncStatus.IN_SYNC)
        pool = client.create(make("IPPool", "p", {"cidr": "10.9.0.0/16"}))
        key = IPPoolKey("10.9.0.0/16")
        recorder.wait_for(lambda r: key in r.state)
        client.delete("IPPool", pool.metadata.name)
        recorder.wait_for(lambda r: key not in r.state)
    finally:
        syncer.stop()
    assert recorder.errors == []


def test_bgp_syncer_filters_block_affinities_by_node(client: Client, recorder: Recorder) -> None:
    populate(client)
    state = run(bgp_syncer(client.backend, recorder, node="node1"), recorder)
    assert set(state) == {
        "/calico/v1/ipam/v4/pool/10.65.0.0-16",
        V3 + "bgpconfigurations/default",
        V3 + "nodes/node1",
        V3 + "nodes/node2",
        V3 + "bgppeers/rr",
        "/calico/ipam/v2/host/node1/ipv4/block/10.65.1.0-26",
    }
    assert state["/calico/ipam/v2/host/node1/ipv4/block/10.65.1.0-26"] == {
        "state": "confirmed",
        "deleted": False,
    }


def test_bgp_syncer_without_node_sees_all_affinities(client: Client, recorder: Recorder) -> None:
    populate(client)
    state = run(bgp_syncer(client.backend, recorder), recorder)
    blocks = {k for k in state if k.startswith("/calico/ipam/v2/host/")}
    assert blocks == {
        "/calico/ipam/v2/host/node1/ipv4/block/10.65.1.0-26",
        "/calico/ipam/v2/host/node2/ipv4/block/10.65.2.0-26",
    }


def test_tunnel_ip_allocation_and_node_status(client: Client, recorder: Recorder) -> None:
    populate(client)
    state = run(tunnel_ip_allocation_syncer(client.backend, recorder, node="node2"), recorder)
    assert set(state) == {"/calico/v1/ipam/v4/pool/10.65.0.0-16", V3 + "nodes/node2"}
    other = Recorder()
    state = run(new_syncer("node-status", client.backend, other), other)
    assert set(state) == {V3 + "caliconodestatuses/node1-status"}
