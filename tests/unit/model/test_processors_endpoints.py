"""Endpoint-side processors: WorkloadEndpoint, HostEndpoint, Profile, (Global)NetworkSet."""

from __future__ import annotations

from typing import Any

from processor_json import at_path

from calico.model import processors as p

global_network_set = at_path(p.global_network_set)
host_endpoint = at_path(p.host_endpoint)
network_set = at_path(p.network_set)
profile = at_path(p.profile)
workload_endpoint = at_path(p.workload_endpoint)

V3 = "/calico/resources/v3/projectcalico.org/"
WEP_NAME = "node1-k8s-nginx--abc-eth0"
WEP_PATH = V3 + f"workloadendpoints/default/{WEP_NAME}"


def res(kind: str, meta: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "projectcalico.org/v3", "kind": kind, "metadata": meta, "spec": spec}


def wep(**spec: Any) -> dict[str, Any]:
    base = {
        "orchestrator": "k8s",
        "node": "node1",
        "pod": "nginx-abc",
        "endpoint": "eth0",
        "interfaceName": "cali0123456789a",
    }
    meta = {
        "name": WEP_NAME,
        "namespace": "default",
        "labels": {"app": "nginx", "pcns.spoof": "x", "pcsa.spoof": "y"},
    }
    return res("WorkloadEndpoint", meta, {**base, **spec})


def test_workload_endpoint_full() -> None:
    value = wep(
        ipNetworks=["10.65.0.2/32", "fd00::2/128"],
        ipNATs=[{"internalIP": "10.65.0.2", "externalIP": "172.16.0.9"}],
        ipv4Gateway="169.254.1.1",
        mac="EE:EE:EE:EE:EE:EE",
        profiles=["kns.default", "ksa.default.web"],
        serviceAccountName="web",
        ports=[
            {"name": "http", "protocol": "TCP", "port": 80},
            {"protocol": "UDP", "port": 53, "hostPort": 5353},
        ],
        allowSpoofedSourcePrefixes=["10.9.0.0/16"],
    )
    value["metadata"]["annotations"] = {"note": "n"}
    value["metadata"]["generateName"] = "nginx-"
    assert workload_endpoint(WEP_PATH, value) == {
        "/calico/v1/host/node1/workload/k8s/default%2fnginx-abc/endpoint/eth0": {
            "state": "active",
            "name": "cali0123456789a",
            "active_instance_id": "",
            "mac": "ee:ee:ee:ee:ee:ee",
            "profile_ids": ["kns.default", "ksa.default.web"],
            "ipv4_nets": ["10.65.0.2/32"],
            "ipv6_nets": ["fd00::2/128"],
            "ipv4_nat": [{"int_ip": "10.65.0.2", "ext_ip": "172.16.0.9"}],
            "labels": {
                "app": "nginx",
                "projectcalico.org/namespace": "default",
                "projectcalico.org/orchestrator": "k8s",
                "projectcalico.org/serviceaccount": "web",
            },
            "ipv4_gateway": "169.254.1.1",
            # Unnamed ports are of no use to policy and are dropped, as upstream.
            "ports": [{"name": "http", "protocol": "tcp", "port": 80}],
            "generate_name": "nginx-",
            "allow_spoofed_source_ips": ["10.9.0.0/16"],
            "annotations": {"note": "n"},
        }
    }


def test_workload_endpoint_minimal_and_spoofed_namespace_label() -> None:
    value = wep(ipNetworks=["10.65.0.3/32"])
    value["metadata"]["labels"] = {"projectcalico.org/namespace": "kube-system"}
    out = workload_endpoint(WEP_PATH, value)
    assert out == {
        "/calico/v1/host/node1/workload/k8s/default%2fnginx-abc/endpoint/eth0": {
            "state": "active",
            "name": "cali0123456789a",
            "active_instance_id": "",
            "mac": None,
            "profile_ids": None,
            "ipv4_nets": ["10.65.0.3/32"],
            "ipv6_nets": None,
            "labels": {
                "projectcalico.org/namespace": "default",
                "projectcalico.org/orchestrator": "k8s",
            },
        }
    }


def test_workload_endpoint_without_ips_is_not_sent() -> None:
    assert workload_endpoint(WEP_PATH, wep()) == {}
    assert workload_endpoint(WEP_PATH, wep(ipNetworks=[])) == {}


def test_host_endpoint() -> None:
    value = res(
        "HostEndpoint",
        {"name": "node1-eth0", "labels": {"role": "edge"}},
        {
            "node": "node1",
            "interfaceName": "eth0",
            "expectedIPs": ["10.0.0.1", "fd00::1"],
            "profiles": ["projectcalico-default-allow"],
            "ports": [{"name": "ssh", "protocol": "TCP", "port": 22}],
        },
    )
    assert host_endpoint(V3 + "hostendpoints/node1-eth0", value) == {
        "/calico/v1/host/node1/endpoint/node1-eth0": {
            "name": "eth0",
            "expected_ipv4_addrs": ["10.0.0.1"],
            "expected_ipv6_addrs": ["fd00::1"],
            "labels": {"role": "edge"},
            "profile_ids": ["projectcalico-default-allow"],
            "ports": [{"name": "ssh", "protocol": "tcp", "port": 22}],
        }
    }


def test_host_endpoint_by_ip_only() -> None:
    value = res("HostEndpoint", {"name": "h"}, {"node": "n2", "expectedIPs": ["10.0.0.2"]})
    assert host_endpoint(V3 + "hostendpoints/h", value) == {
        "/calico/v1/host/n2/endpoint/h": {"expected_ipv4_addrs": ["10.0.0.2"], "labels": None}
    }


def test_profile_rules_labels_and_passthrough() -> None:
    value = res(
        "Profile",
        {"name": "kns.prod"},
        {
            "ingress": [{"action": "Allow"}],
            "egress": [{"action": "Allow"}],
            "labelsToApply": {"pcns.env": "prod"},
        },
    )
    path = V3 + "profiles/kns.prod"
    assert profile(path, value) == {
        "/calico/v1/policy/profile/kns.prod/rules": {
            "inbound_rules": [{"action": "allow"}],
            "outbound_rules": [{"action": "allow"}],
        },
        "/calico/v1/policy/profile/kns.prod/labels": {"pcns.env": "prod"},
        path: value,
    }


def test_profile_without_labels_has_no_labels_key() -> None:
    value = res("Profile", {"name": "p"}, {})
    path = V3 + "profiles/p"
    assert profile(path, value) == {
        "/calico/v1/policy/profile/p/rules": {"inbound_rules": [], "outbound_rules": []},
        path: value,
    }


def test_network_sets() -> None:
    ns = res(
        "NetworkSet", {"name": "ext", "labels": {"a": "b"}}, {"nets": ["10.1.2.3", "10.2.0.0/16"]}
    )
    assert network_set(V3 + "networksets/prod/ext", ns) == {
        "/calico/v1/netset/prod%2fext": {
            "nets": ["10.1.2.3/32", "10.2.0.0/16"],
            "labels": {"a": "b", "projectcalico.org/namespace": "prod"},
            "profile_ids": ["kns.prod"],
        }
    }
    gns = res("GlobalNetworkSet", {"name": "g"}, {"nets": ["fd00::/64"]})
    assert global_network_set(V3 + "globalnetworksets/g", gns) == {
        "/calico/v1/netset/g": {"nets": ["fd00::/64"], "labels": None}
    }
