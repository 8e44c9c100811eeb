"""DataplanePassthru scenarios: pools, Nodes (host metadata + WireGuard) and the global
BGPConfiguration, all produced by the real processors."""

from __future__ import annotations

import pytest
from recording_callbacks import RecordingCallbacks, feed

from calico.felix.calc.dataplane_passthru import DataplanePassthru
from calico.felix.calc.fanout import TypeFanout
from calico.felix.messages import (
    GlobalBGPConfigUpdate,
    HostMetadataV4V6Update,
    IPAMPool,
    WireguardEndpointUpdate,
    WireguardEndpointV6Update,
)

POOL = """
apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {name: p1}
spec: {cidr: 10.0.0.0/16, ipipMode: CrossSubnet, natOutgoing: true}
"""
BGP_NODE = """
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node1, labels: {zone: a, kubernetes.io/hostname: node1}}
spec:
  bgp: {ipv4Address: 192.168.0.1/24, ipv6Address: "fd00::1/64", asNumber: 64512}
  addresses: [{address: 10.9.9.9, type: InternalIP}]
"""
PLAIN_NODE = """
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node2}
spec:
  addresses:
  - {address: 203.0.113.2, type: ExternalIP}
  - {address: 192.168.0.2, type: InternalIP}
"""
WG_NODE = """
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node3}
spec:
  addresses: [{address: 192.168.0.3, type: InternalIP}]
  wireguard: {interfaceIPv4Address: 10.0.3.1, interfaceIPv6Address: "fd00:3::1"}
status: {wireguardPublicKey: "pub4=", wireguardPublicKeyV6: "pub6="}
"""
WG_NODE_NO_V6_KEY = WG_NODE.replace(', wireguardPublicKeyV6: "pub6="', "")


def bgp_config(name: str = "default") -> str:
    return f"""
apiVersion: projectcalico.org/v3
kind: BGPConfiguration
metadata: {{name: {name}}}
spec:
  serviceClusterIPs: [{{cidr: 10.96.0.0/12}}]
  serviceExternalIPs: [{{cidr: 198.51.100.0/24}}, {{cidr: "2001:db8::/64"}}]
  serviceLoadBalancerIPs: [{{cidr: 203.0.113.0/24}}]
"""


@pytest.fixture
def setup() -> tuple[TypeFanout, RecordingCallbacks]:
    rec = RecordingCallbacks()
    fanout = TypeFanout()
    DataplanePassthru(rec, "node1").register(fanout)
    return fanout, rec


def test_ip_pool_update_dedup_and_remove(setup: tuple[TypeFanout, RecordingCallbacks]) -> None:
    fanout, rec = setup
    feed(fanout, POOL)
    feed(fanout, POOL)
    expected = IPAMPool("10.0.0.0/16", masquerade=True, ipip_mode="CrossSubnet")
    assert rec.take() == [("on_ip_pool_update", "10.0.0.0-16", expected)]
    feed(fanout, POOL, delete=True)
    feed(fanout, POOL, delete=True)
    assert rec.take() == [("on_ip_pool_remove", "10.0.0.0-16")]


def test_host_metadata_from_bgp(setup: tuple[TypeFanout, RecordingCallbacks]) -> None:
    fanout, rec = setup
    feed(fanout, BGP_NODE)
    meta = HostMetadataV4V6Update(
        hostname="node1",
        ipv4_addr="192.168.0.1",
        ipv6_addr="fd00::1",
        asnumber="64512",
        labels=(("kubernetes.io/hostname", "node1"), ("zone", "a")),
    )
    assert rec.take() == [("on_host_metadata_update", meta)]
    feed(fanout, BGP_NODE)
    assert rec.take() == []
    feed(fanout, BGP_NODE, delete=True)
    assert rec.take() == [("on_host_metadata_remove", "node1")]


def test_host_metadata_falls_back_to_internal_ip(
    setup: tuple[TypeFanout, RecordingCallbacks],
) -> None:
    fanout, rec = setup
    feed(fanout, PLAIN_NODE)
    meta = HostMetadataV4V6Update(hostname="node2", ipv4_addr="192.168.0.2")
    assert rec.take() == [("on_host_metadata_update", meta)]


def test_wireguard_per_family(setup: tuple[TypeFanout, RecordingCallbacks]) -> None:
    fanout, rec = setup
    feed(fanout, WG_NODE)
    assert rec.take() == [
        ("on_host_metadata_update", HostMetadataV4V6Update("node3", ipv4_addr="192.168.0.3")),
        ("on_wireguard_update", WireguardEndpointUpdate("node3", "pub4=", "10.0.3.1")),
        ("on_wireguard_v6_update", WireguardEndpointV6Update("node3", "pub6=", "fd00:3::1")),
    ]
    feed(fanout, WG_NODE_NO_V6_KEY)
    assert rec.take() == [("on_wireguard_v6_remove", "node3")]
    feed(fanout, WG_NODE_NO_V6_KEY, delete=True)
    assert rec.take() == [
        ("on_host_metadata_remove", "node3"),
        ("on_wireguard_remove", "node3"),
    ]


def test_global_bgp_config(setup: tuple[TypeFanout, RecordingCallbacks]) -> None:
    fanout, rec = setup
    feed(fanout, bgp_config("node.node1"))
    assert rec.take() == []
    feed(fanout, bgp_config())
    update = GlobalBGPConfigUpdate(
        service_cluster_cidrs=("10.96.0.0/12",),
        service_external_cidrs=("198.51.100.0/24", "2001:db8::/64"),
        service_loadbalancer_cidrs=("203.0.113.0/24",),
    )
    assert rec.take() == [("on_global_bgp_config_update", update)]
    feed(fanout, bgp_config(), delete=True)
    assert rec.take() == [("on_global_bgp_config_update", GlobalBGPConfigUpdate())]
