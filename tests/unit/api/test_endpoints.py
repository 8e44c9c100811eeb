"""Profile, NetworkSet, GlobalNetworkSet, HostEndpoint and WorkloadEndpoint."""

from __future__ import annotations

import pytest
from apihelpers import MANIFESTS, decode_error, issues, load_one

from calico.api import dump_resources, load_documents, load_file
from calico.api.endpoints import HostEndpoint, Profile, WorkloadEndpoint

HEAD = "apiVersion: projectcalico.org/v3\n"


def doc(
    kind: str, spec: str, name: str = "x", namespace: str | None = None, labels: str = ""
) -> str:
    meta = f"  name: {name}\n" + (f"  namespace: {namespace}\n" if namespace else "")
    meta += f"  labels: {labels}\n" if labels else ""
    return f"{HEAD}kind: {kind}\nmetadata:\n{meta}spec: {spec}\n"


def hep(spec: str) -> str:
    return doc("HostEndpoint", spec)


def wep(spec: str) -> str:
    return doc("WorkloadEndpoint", "{interfaceName: cali1, " + spec + "}", namespace="ns")


def test_upstream_examples_load_and_round_trip() -> None:
    resources = load_file(MANIFESTS / "endpoint-examples.yaml")
    assert [r.kind for r in resources] == [
        "HostEndpoint",
        "WorkloadEndpoint",
        "Profile",
        "NetworkSet",
        "GlobalNetworkSet",
    ]
    for fmt in ("yaml", "json"):
        assert load_documents(dump_resources(resources, fmt)) == resources
    heps, weps, profile = resources[0], resources[1], resources[2]
    assert isinstance(heps, HostEndpoint) and heps.spec.expected_ips == [
        "192.168.0.1",
        "192.168.0.2",
    ]
    assert isinstance(weps, WorkloadEndpoint) and weps.spec.ip_nats[0].external_ip == "172.16.0.10"
    assert isinstance(profile, Profile) and profile.spec.labels_to_apply == {"stage": "development"}


def test_host_endpoint_requirements() -> None:
    load_one(hep("{node: n1, interfaceName: '*'}"))
    load_one(hep("{node: n1, expectedIPs: ['fd00::1']}"))
    assert issues(hep("{interfaceName: eth0}")) == ["spec.node: node must be specified"]
    assert issues(hep("{node: n1}")) == [
        "spec.interfaceName: at least one of interfaceName or expectedIPs must be specified"
    ]
    assert issues(hep("{node: n1, interfaceName: this-name-is-too-long}")) == [
        "spec.interfaceName: interface name 'this-name-is-too-long' is invalid: 1-15 characters "
        "from a-z, A-Z, 0-9, '_', '.', '-' (or '*' for all interfaces)"
    ]
    assert issues(hep("{node: n1, expectedIPs: [10.0.0.0/24]}")) == [
        "spec.expectedIPs: '10.0.0.0/24' is not a valid IP address"
    ]
    assert issues(hep("{node: n1, interfaceName: eth0, profiles: [Bad]}")) == [
        "spec.profiles: name 'Bad' must be a DNS-1123 subdomain: at most 253 lower-case "
        "alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character"
    ]


@pytest.mark.parametrize(
    ("port", "expected"),
    [
        (
            "{name: web, protocol: ICMP, port: 80}",
            "spec.ports[0].protocol: protocol must be TCP, UDP or SCTP",
        ),
        (
            "{name: web, protocol: TCP, port: 0}",
            "spec.ports[0].port: port 0 is out of range 1-65535",
        ),
        ("{name: web, protocol: TCP}", "spec.ports[0].port: field is required"),
        (
            "{name: Web_1, protocol: TCP, port: 80}",
            "spec.ports[0].name: 'Web_1' is not a valid port name: at most 15 lower-case "
            "alphanumeric characters or '-', containing at least one letter, no '--', not "
            "starting or ending with '-'",
        ),
    ],
)
def test_host_endpoint_ports(port: str, expected: str) -> None:
    assert issues(hep("{node: n1, interfaceName: eth0, ports: [" + port + "]}")) == [expected]


def test_workload_endpoint_rules() -> None:
    assert issues(doc("WorkloadEndpoint", "{node: n1}", namespace="ns")) == [
        "spec.interfaceName: interfaceName must be specified"
    ]
    assert issues(wep("ipNetworks: [10.0.0.0/24]")) == [
        "spec.ipNetworks: '10.0.0.0/24': only /32 (IPv4) or /128 (IPv6) networks are supported"
    ]
    assert issues(
        wep("ipNetworks: [10.0.0.1/32], ipNATs: [{internalIP: 10.0.0.2, externalIP: 1.1.1.1}]")
    ) == ["spec.ipNATs[0].internalIP: internalIP 10.0.0.2 is not one of the endpoint's ipNetworks"]
    assert issues(wep("ipNATs: [{internalIP: 10.0.0.2, externalIP: 'fd00::1'}]")) == [
        "spec.ipNATs[0].externalIP: internalIP and externalIP must be the same family"
    ]
    assert issues(wep("ipv4Gateway: 'fe80::1'")) == [
        "spec.ipv4Gateway: 'fe80::1' is not an IPv4 address"
    ]
    assert issues(wep("mac: zz:zz")) == ["spec.mac: 'zz:zz' is not a valid MAC address"]
    assert issues(wep("containerID: -abc")) == [
        "spec.containerID: container ID '-abc' is invalid: alphanumeric characters or '-', "
        "starting and ending with an alphanumeric character"
    ]
    assert issues(wep("ports: [{protocol: TCP, port: 80}]")) == [
        "spec.ports[0].name: name must not be empty if no hostPort is specified"
    ]
    load_one(wep("ports: [{protocol: UDP, port: 53, hostPort: 5353, hostIP: 10.0.0.1}]"))


def test_workload_endpoint_namespace_left_unset() -> None:
    res = load_one(doc("WorkloadEndpoint", "{interfaceName: cali1}"))
    assert res.metadata.namespace is None


def test_network_sets() -> None:
    gns = load_one(doc("GlobalNetworkSet", "{nets: [10.0.0.1/8, 'fd00::/64']}"))
    assert gns.spec.nets == ["10.0.0.1/8", "fd00::/64"]
    assert issues(doc("NetworkSet", "{nets: [300.0.0.0/8]}", namespace="ns")) == [
        "spec.nets: '300.0.0.0/8' is not a valid CIDR"
    ]
    assert decode_error(doc("NetworkSet", "{allowedEgressDomains: [a.com]}", namespace="ns")) == (
        "field in document is not recognized or is in the wrong location: allowedEgressDomains"
    )
    assert issues(doc("GlobalNetworkSet", "{allowedEgressDomains: ['a b']}")) == [
        "spec.allowedEgressDomains: 'a b' is not a valid domain name (a leading '*.' is allowed)"
    ]
    labels = "{projectcalico.org/namespace: x}"
    assert issues(doc("GlobalNetworkSet", "{}", labels=labels)) == [
        "metadata.labels[projectcalico.org/namespace]: projectcalico.org/namespace is not a valid "
        "label name (it is reserved)"
    ]
    assert issues(doc("GlobalNetworkSet", "{}", namespace="ns")) == [
        "metadata.namespace: namespace should not be specified for a non-namespaced resource "
        "(GlobalNetworkSet is cluster-scoped)"
    ]


def test_profile_rules_and_labels() -> None:
    assert issues(doc("Profile", "{labelsToApply: {'bad key!': v}}")) == [
        "spec.labelsToApply: label key 'bad key!' is not a valid Kubernetes label name"
    ]
    assert issues(
        doc("Profile", "{ingress: [{action: Allow, protocol: TCP, icmp: {type: 1}}]}")
    ) == ["spec.ingress[0].icmp: rules that specify icmp must set protocol to ICMP or ICMPv6"]
    load_one(doc("Profile", "{}", name="kns.default"))


def test_metadata_labels_checked() -> None:
    assert issues(doc("Profile", "{}", labels="{app: 'not valid!'}")) == [
        "metadata.labels.app: label value 'not valid!' is not a valid Kubernetes label value"
    ]
