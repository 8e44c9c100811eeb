"""ClusterInformation, FelixConfiguration and Node processors."""

from __future__ import annotations

from typing import Any

import pytest
from processor_json import at_path

from calico.model import processors as p
from calico.model.processors.confignames import go_float, param_name

cluster_information = at_path(p.cluster_information)
felix_configuration = at_path(p.felix_configuration)
node = at_path(p.node)

V3 = "/calico/resources/v3/projectcalico.org/"


def res(kind: str, meta: dict[str, Any], spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": kind,
        "metadata": meta,
        "spec": spec,
        **extra,
    }


def test_cluster_information_fields_and_ready_flag() -> None:
    spec = {
        "clusterGUID": "abc123",
        "clusterType": "typha,kdd",
        "calicoVersion": "v3.30.0",
        "datastoreReady": True,
    }
    out = cluster_information(
        V3 + "clusterinformations/default", res("ClusterInformation", {"name": "default"}, spec)
    )
    assert out == {
        "/calico/v1/config/ClusterGUID": "abc123",
        "/calico/v1/config/ClusterType": "typha,kdd",
        "/calico/v1/config/CalicoVersion": "v3.30.0",
        "/calico/v1/Ready": True,
    }
    spec["datastoreReady"] = False
    out = cluster_information(
        V3 + "clusterinformations/default", res("ClusterInformation", {"name": "default"}, spec)
    )
    assert out["/calico/v1/Ready"] is False


def test_cluster_information_other_name_rejected() -> None:
    with pytest.raises(ValueError):
        cluster_information(
            V3 + "clusterinformations/other", res("ClusterInformation", {"name": "other"}, {})
        )


FELIX_SPEC = {
    "logSeverityScreen": "Debug",
    "ipipEnabled": True,
    "ipipMTU": 1400,
    "vxlanVNI": 4097,
    "reportingInterval": "30s",
    "iptablesRefreshInterval": "1m30s",
    "iptablesLockProbeInterval": "50ms",
    "routeRefreshInterval": "500ms",
    "failsafeInboundHostPorts": [
        {"protocol": "TCP", "port": 22},
        {"protocol": "UDP", "port": 68, "net": "10.0.0.0/8"},
        {"protocol": "TCP", "port": 179, "net": "fd00::/8"},
    ],
    "failsafeOutboundHostPorts": [],
    "interfacePrefix": "cali,tap",
    "externalNodesList": ["10.9.0.0/16", "10.10.0.0/16"],
    "routeTableRanges": [{"min": 1, "max": 250}, {"min": 300, "max": 400}],
    "kubeNodePortRanges": [30000, "31000:32767"],
    "bpfLogFilters": {"weps": "tcp", "all": "udp"},
    "healthTimeoutOverrides": [{"name": "InternalDataplaneMainLoop", "timeout": "2m"}],
    "iptablesMarkMask": 4294901760,
    "bpfEnabled": False,
    "logPrefix": "",
}
FELIX_PARAMS = {
    "LogSeverityScreen": "Debug",
    "IpInIpEnabled": "true",
    "IpInIpMtu": "1400",
    "VXLANVNI": "4097",
    "ReportingIntervalSecs": "30",
    "IptablesRefreshInterval": "90",
    "IptablesLockProbeIntervalMillis": "50",
    "RouteRefreshInterval": "0.5",
    "FailsafeInboundHostPorts": "tcp:22,udp:10.0.0.0/8:68,tcp:[fd00::/8]:179",
    "FailsafeOutboundHostPorts": "none",
    "InterfacePrefix": "cali,tap",
    "ExternalNodesCIDRList": "10.9.0.0/16,10.10.0.0/16",
    "RouteTableRanges": "1-250,300-400",
    "KubeNodePortRanges": "30000,31000:32767",
    "BPFLogFilters": "all=udp,weps=tcp,",
    "HealthTimeoutOverrides": "InternalDataplaneMainLoop=2m0s",  # Go prints metav1.Duration
    "IptablesMarkMask": "4294901760",
    "BPFEnabled": "false",
}


def test_felix_configuration_global() -> None:
    value = res(
        "FelixConfiguration",
        {"name": "default", "annotations": {"config.projectcalico.org/Extra": "x"}},
        FELIX_SPEC,
    )
    out = felix_configuration(V3 + "felixconfigurations/default", value)
    want = {f"/calico/v1/config/{k}": v for k, v in FELIX_PARAMS.items()}
    want["/calico/v1/config/Extra"] = "x"
    assert out == want


def test_felix_configuration_per_node_and_annotation_override() -> None:
    value = res(
        "FelixConfiguration",
        {
            "name": "node.node1",
            "annotations": {"config.projectcalico.org/LogSeverityScreen": "Warning"},
        },
        {"logSeverityScreen": "Debug", "wireguardEnabled": True},
    )
    out = felix_configuration(V3 + "felixconfigurations/node.node1", value)
    assert out == {
        "/calico/v1/host/node1/config/LogSeverityScreen": "Warning",
        "/calico/v1/host/node1/config/WireguardEnabled": "true",
    }


def test_felix_configuration_selector_scoped_passes_through() -> None:
    path = V3 + "felixconfigurations/edge-nodes"
    value = res(
        "FelixConfiguration",
        {"name": "edge-nodes"},
        {"nodeSelector": "role == 'edge'", "bpfEnabled": True},
    )
    assert felix_configuration(path, value) == {path: value}


@pytest.mark.parametrize(
    ("json_name", "param"),
    [
        ("logSeverityScreen", "LogSeverityScreen"),
        ("ipipEnabled", "IpInIpEnabled"),
        ("ipv6Support", "Ipv6Support"),
        ("bpfPSNATPorts", "BPFPSNATPorts"),
        ("vxlanMTUV6", "VXLANMTUV6"),
        ("natOutgoingAddress", "NATOutgoingAddress"),
        ("nftablesRefreshInterval", "NftablesRefreshInterval"),
        ("wireguardKeepAlive", "WireguardPersistentKeepAlive"),
    ],
)
def test_param_names(json_name: str, param: str) -> None:
    assert param_name(json_name) == param


def test_go_float() -> None:
    assert [go_float(x) for x in (90.0, 0.05, 1.5, 0.0)] == ["90", "0.05", "1.5", "0"]


def test_node_tunnel_addresses_wireguard_and_passthrough() -> None:
    path = V3 + "nodes/node1"
    value = res(
        "Node",
        {"name": "node1"},
        {
            "bgp": {"ipv4Address": "10.0.0.1/24", "ipv4IPIPTunnelAddr": "192.168.0.1"},
            "ipv4VXLANTunnelAddr": "192.168.1.1",
            "vxlanTunnelMACAddr": "66:55:44:33:22:11",
            "ipv6VXLANTunnelAddr": "fd00::1",
            "vxlanTunnelMACAddrV6": "66:55:44:33:22:12",
            "wireguard": {"interfaceIPv4Address": "192.168.2.1"},
        },
        status={"wireguardPublicKey": "jlkVyQYooZYzI2wFfNhSZez5eWh44yfq1wKVjLvSXgY="},
    )
    assert node(path, value) == {
        "/calico/v1/host/node1/config/IpInIpTunnelAddr": "192.168.0.1",
        "/calico/v1/host/node1/config/IPv4VXLANTunnelAddr": "192.168.1.1",
        "/calico/v1/host/node1/config/VXLANTunnelMACAddr": "66:55:44:33:22:11",
        "/calico/v1/host/node1/config/IPv6VXLANTunnelAddr": "fd00::1",
        "/calico/v1/host/node1/config/VXLANTunnelMACAddrV6": "66:55:44:33:22:12",
        path: value,
        "/calico/v1/host/node1/wireguard": {
            "interfaceIPv4Addr": "192.168.2.1",
            "publicKey": "jlkVyQYooZYzI2wFfNhSZez5eWh44yfq1wKVjLvSXgY=",
        },
    }


def test_plain_node_is_only_passed_through() -> None:
    path = V3 + "nodes/node2"
    value = res("Node", {"name": "node2"}, {"bgp": {"ipv4Address": "10.0.0.2/24"}})
    assert node(path, value) == {path: value}


node_pod_cidr = at_path(p.node_pod_cidr)


def test_node_pod_cidr_adds_a_block_per_pod_cidr() -> None:
    path = V3 + "nodes/node2"
    value = res(
        "Node",
        {"name": "node2"},
        {"bgp": {"ipv4Address": "10.0.0.2/24"}},
        status={"podCIDRs": ["10.244.2.0/24", "10.244.9.7/24", "fd00:2::/64", "bogus"]},
    )
    assert node_pod_cidr(path, value) == {
        **node(path, value),
        # Masked like upstream's ParseCIDR; an unparsable entry is skipped, not fatal.
        "/calico/ipam/v2/assignment/ipv4/block/10.244.2.0-24": {
            "cidr": "10.244.2.0/24",
            "affinity": "host:node2",
            "strictAffinity": False,
            "allocations": [],
            "unallocated": [],
            "attributes": [],
            "deleted": False,
            "sequenceNumber": 0,
        },
        "/calico/ipam/v2/assignment/ipv4/block/10.244.9.0-24": {
            "cidr": "10.244.9.0/24",
            "affinity": "host:node2",
            "strictAffinity": False,
            "allocations": [],
            "unallocated": [],
            "attributes": [],
            "deleted": False,
            "sequenceNumber": 0,
        },
        "/calico/ipam/v2/assignment/ipv6/block/fd00:2::-64": {
            "cidr": "fd00:2::/64",
            "affinity": "host:node2",
            "strictAffinity": False,
            "allocations": [],
            "unallocated": [],
            "attributes": [],
            "deleted": False,
            "sequenceNumber": 0,
        },
    }


def test_node_pod_cidr_without_pod_cidrs_is_the_plain_node_processor() -> None:
    path = V3 + "nodes/node1"
    value = res("Node", {"name": "node1"}, {"bgp": {"ipv4Address": "10.0.0.1/24"}})
    assert node_pod_cidr(path, value) == node(path, value) == {path: value}
