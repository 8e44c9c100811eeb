"""KubeControllersConfiguration, ClusterInformation, Node and CalicoNodeStatus."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from calico.api.base import Resource, resource_class
from calico.api.cluster import (
    CalicoNodeStatus,
    ClusterInformation,
    KubeControllersConfiguration,
    Node,
)


def errors(cls: type[Resource], d: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as info:
        cls.model_validate(d)
    return [
        (".".join(str(p) for p in e["loc"]), e["msg"].removeprefix("Value error, "))
        for e in info.value.errors()
    ]


KCC = """
apiVersion: projectcalico.org/v3
kind: KubeControllersConfiguration
metadata:
  name: default
spec:
  logSeverityScreen: Info
  healthChecks: Enabled
  etcdV3CompactionPeriod: 10m
  prometheusMetricsPort: 9094
  controllers:
    node:
      reconcilerPeriod: 5m
      leakGracePeriod: 15m
      syncLabels: Enabled
      hostEndpoint:
        autoCreate: Disabled
    policy:
      reconcilerPeriod: 5m
    workloadEndpoint:
      reconcilerPeriod: 5m
    serviceAccount:
      reconcilerPeriod: 5m
    namespace:
      reconcilerPeriod: 5m
    loadBalancer:
      assignIPs: AllServices
"""


def test_kube_controllers_configuration() -> None:
    k = KubeControllersConfiguration.model_validate(yaml.safe_load(KCC))
    assert k.spec.controllers.load_balancer is not None
    assert k.spec.controllers.load_balancer.assign_ips == "AllServices"
    assert (
        k.to_wire()["spec"]["etcdV3CompactionPeriod"] == "10m0s"
    )  # Go prints metav1.Duration canonically
    assert KubeControllersConfiguration.model_validate(k.to_wire()) == k
    assert resource_class("kubecontrollersconfigs") is KubeControllersConfiguration
    base = yaml.safe_load(KCC)
    assert errors(KubeControllersConfiguration, {**base, "metadata": {"name": "kcc"}}) == [
        (
            "metadata.name",
            "KubeControllersConfiguration name 'kcc' is invalid: "
            "the only allowed name is 'default'",
        )
    ]
    bad = yaml.safe_load(KCC.replace("10m", "ten minutes"))
    assert errors(KubeControllersConfiguration, bad) == [
        ("spec.etcdV3CompactionPeriod", 'invalid duration "ten minutes"')
    ]
    bad = yaml.safe_load(KCC.replace("assignIPs: AllServices", "assignIPs: Some"))
    assert errors(KubeControllersConfiguration, bad) == [
        (
            "spec.controllers.loadBalancer.assignIPs",
            "Input should be 'AllServices' or 'RequestedServicesOnly'",
        )
    ]
    bad = yaml.safe_load(KCC.replace("9094", "90940"))
    assert errors(KubeControllersConfiguration, bad) == [
        ("spec.prometheusMetricsPort", "Input should be less than or equal to 65535")
    ]


def test_cluster_information() -> None:
    d = {
        "apiVersion": "projectcalico.org/v3",
        "kind": "ClusterInformation",
        "metadata": {"name": "default"},
        "spec": {
            "clusterGUID": "5e2d9d51a7a04b6b8f3c8ab1e5dbd3b2",
            "clusterType": "k8s,bgp",
            "calicoVersion": "v3.31.0",
            "datastoreReady": True,
            "variant": "Calico",
        },
    }
    c = ClusterInformation.model_validate(d)
    assert c.to_wire() == d
    assert resource_class("clusterinfo") is ClusterInformation
    assert errors(ClusterInformation, {**d, "metadata": {"name": "cluster"}}) == [
        (
            "metadata.name",
            "ClusterInformation name 'cluster' is invalid: the only allowed name is 'default'",
        )
    ]
    assert errors(ClusterInformation, {**d, "spec": {"datastoreReady": "yes please"}}) == [
        ("spec.datastoreReady", "Input should be a valid boolean, unable to interpret input")
    ]


NODE = """
apiVersion: projectcalico.org/v3
kind: Node
metadata:
  name: node-hostname
spec:
  bgp:
    asNumber: 64512
    ipv4Address: 10.244.0.1/24
    ipv6Address: 2001:db8:85a3::8a2e:370:7334/120
    ipv4IPIPTunnelAddr: 192.168.0.1
    routeReflectorClusterID: 224.0.0.1
  ipv4VXLANTunnelAddr: 192.168.1.1
  vxlanTunnelMACAddr: 66:cf:23:df:22:07
  orchRefs:
    - nodeName: node-hostname
      orchestrator: k8s
  addresses:
    - address: 10.244.0.1
      type: CalicoNodeIP
  wireguard:
    interfaceIPv4Address: 192.168.2.1
status:
  podCIDRs:
    - 192.168.0.0/24
  wireguardPublicKey: jlkVyQYooZYzI2wFfNhSZez5eWh44yfq1wKVjLvSXgY=
"""


def test_node() -> None:
    n = Node.model_validate(yaml.safe_load(NODE))
    assert n.spec.bgp is not None and n.spec.bgp.ipv4_address == "10.244.0.1/24"
    wire = n.to_wire()
    assert wire["spec"]["bgp"]["ipv4IPIPTunnelAddr"] == "192.168.0.1"
    assert wire["status"]["podCIDRs"] == ["192.168.0.0/24"]
    assert Node.model_validate(wire) == n
    for alias in ("node", "nodes", "no", "nos"):
        assert resource_class(alias) is Node


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "ipv4Address: 10.244.0.1/24",
            "ipv4Address: 2001:db8::1/64",
            ("spec.bgp.ipv4Address", "'2001:db8::1/64' is not an IPv4 CIDR"),
        ),
        (
            "ipv4IPIPTunnelAddr: 192.168.0.1",
            "ipv4IPIPTunnelAddr: 192.168.0.300",
            ("spec.bgp.ipv4IPIPTunnelAddr", "'192.168.0.300' is not a valid IP address"),
        ),
        (
            "asNumber: 64512",
            "asNumber: 1.2.3",
            ("spec.bgp.asNumber", "'1.2.3' is not a valid AS number"),
        ),
        (
            "66:cf:23:df:22:07",
            "66:cf:23:df:22",
            ("spec.vxlanTunnelMACAddr", "'66:cf:23:df:22' is not a valid MAC address"),
        ),
        (
            "type: CalicoNodeIP",
            "type: PublicIP",
            (
                "spec.addresses.0.type",
                "Input should be 'CalicoNodeIP', 'InternalIP' or 'ExternalIP'",
            ),
        ),
        ("      orchestrator: k8s", "", ("spec.orchRefs.0.orchestrator", "Field required")),
        (
            "name: node-hostname",
            "name: Node_1",
            (
                "metadata.name",
                "name 'Node_1' must be a DNS-1123 subdomain: at most 253 lower-case alphanumeric "
                "characters, '-' or '.', starting and ending with an alphanumeric character",
            ),
        ),
    ],
)
def test_invalid_nodes(old: str, new: str, expected: tuple[str, str]) -> None:
    assert old in NODE
    assert errors(Node, yaml.safe_load(NODE.replace(old, new))) == [expected]


STATUS = """
apiVersion: projectcalico.org/v3
kind: CalicoNodeStatus
metadata:
  name: my-caliconodestatus-1
spec:
  classes:
    - Agent
    - BGP
    - Routes
  node: my-node
  updatePeriodSeconds: 10
status:
  lastUpdated: "2021-09-06T09:52:33Z"
  agent:
    birdV4:
      state: Ready
      version: v0.3.3+birdv1.6.8
      routerID: 172.17.0.0
      lastBootTime: "2021-09-06 09:52:32"
      lastReconfigurationTime: "2021-09-06 09:52:32"
  bgp:
    numberEstablishedV4: 1
    numberEstablishedV6: 0
    numberNotEstablishedV4: 0
    numberNotEstablishedV6: 0
    peersV4:
      - peerIP: 172.17.0.5
        since: "09:52:33"
        state: Established
        type: NodeMesh
  routes:
    routesV4:
      - destination: 192.168.162.128/26
        gateway: 172.17.0.5
        interface: eth0
        learnedFrom:
          peerIP: 172.17.0.5
          sourceType: NodeMesh
        type: FIB
"""


def test_calico_node_status() -> None:
    s = CalicoNodeStatus.model_validate(yaml.safe_load(STATUS))
    assert s.spec.classes == ["Agent", "BGP", "Routes"]
    assert s.status is not None and s.status.bgp is not None
    assert s.to_wire()["status"]["bgp"]["peersV4"][0]["peerIP"] == "172.17.0.5"
    assert CalicoNodeStatus.model_validate(s.to_wire()) == s
    assert resource_class("nodestatus") is CalicoNodeStatus
    bad = yaml.safe_load(STATUS.replace("    - Routes", "    - Flows"))
    assert errors(CalicoNodeStatus, bad) == [
        ("spec.classes.2", "Input should be 'Agent', 'BGP' or 'Routes'")
    ]
    bad = yaml.safe_load(STATUS.replace("    - Routes", "    - BGP"))
    assert errors(CalicoNodeStatus, bad) == [
        ("spec.classes", "classes must not contain duplicates")
    ]
    bad = yaml.safe_load(STATUS.replace("updatePeriodSeconds: 10", "updatePeriodSeconds: -1"))
    assert errors(CalicoNodeStatus, bad) == [
        ("spec.updatePeriodSeconds", "Input should be greater than or equal to 0")
    ]


def test_end_to_end_through_io() -> None:
    io = pytest.importorskip("calico.api.io")
    resources = io.load_documents(KCC + "---\n" + NODE + "---\n" + STATUS, source="c.yaml")
    assert [r.KIND for r in resources] == [
        "KubeControllersConfiguration",
        "Node",
        "CalicoNodeStatus",
    ]
    with pytest.raises(Exception) as info:
        io.load_documents(NODE.replace("66:cf:23:df:22:07", "nope"), source="n.yaml")
    text = str(info.value)
    assert "n.yaml" in text and "Node(node-hostname)" in text
    assert "spec.vxlanTunnelMACAddr" in text and "'nope' is not a valid MAC address" in text
