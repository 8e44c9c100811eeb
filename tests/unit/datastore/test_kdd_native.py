"""Native Kubernetes objects -> Calico resources, table-tested against the reference's vectors
(upstream's conversion_test.go / resources/*_test.go behaviour as kdd.md §3 records it)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from calico.api import parse_resource
from calico.datastore.errors import InvalidValueError
from calico.datastore.kubernetes.native import nodes, pods, profiles
from calico.datastore.kubernetes.native.networkpolicy import (
    k8s_network_policy_to_calico,
    label_selector,
    simplify_ports,
)
from calico.datastore.kubernetes.uids import convert_uid

K8S = "projectcalico.org/orchestrator == 'k8s'"


def _np(spec: dict[str, Any], name: str = "np", ns: str = "default") -> dict[str, Any]:
    return k8s_network_policy_to_calico({"metadata": {"name": name, "namespace": ns}, "spec": spec})


# -- selectors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sel", "pods_", "expected"),
    [
        (None, True, K8S),
        ({}, True, K8S),
        (None, False, ""),
        ({}, False, "all()"),
        ({"matchLabels": {"b": "2", "a": "1"}}, True, f"{K8S} && a == '1' && b == '2'"),
        (
            {
                "matchExpressions": [
                    {"key": "k", "operator": "In", "values": ["a", "b"]},
                    {"key": "k2", "operator": "NotIn", "values": ["c"]},
                    {"key": "k3", "operator": "Exists"},
                    {"key": "k4", "operator": "DoesNotExist"},
                ]
            },
            False,
            "k in { 'a', 'b' } && k2 not in { 'c' } && has(k3) && ! has(k4)",
        ),
    ],
)
def test_label_selectors(sel: Any, pods_: bool, expected: str) -> None:
    assert label_selector(sel, pods=pods_) == expected


def test_unknown_operator_is_an_error() -> None:
    with pytest.raises(InvalidValueError, match="operator"):
        label_selector({"matchExpressions": [{"key": "k", "operator": "Gt"}]}, pods=False)


def test_simplify_ports_vector() -> None:
    raw: list[str | int] = ["81:90", 4, 2, "foo", "80:81", 3, 1, 9090, "http"]
    assert simplify_ports(raw) == ["foo", "http", "1:4", "80:90", 9090]
    assert simplify_ports(["http", 80]) == ["http", 80]  # <= 1 numeric: unchanged


# -- policies -------------------------------------------------------------------------------


def test_metadata_order_tier_types_and_raw_name() -> None:
    uid = "30316465-6365-4463-ad63-3564622d3638"
    out = k8s_network_policy_to_calico(
        {
            "metadata": {
                "name": "allow-web",
                "namespace": "x",
                "uid": uid,
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {"podSelector": {"matchLabels": {"app": "web"}}},
        }
    )
    assert out["kind"] == "NetworkPolicy"
    assert out["metadata"] == {
        "name": "allow-web",
        "namespace": "x",
        "uid": convert_uid(uid),
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    assert out["spec"] == {
        "order": 1000,
        "tier": "default",
        "selector": f"{K8S} && app == 'web'",
        "types": ["Ingress"],
    }
    parse_resource(out)  # a valid v3 NetworkPolicy


def test_policy_types_as_listed_and_egress_kept() -> None:
    out = _np({"podSelector": {}, "policyTypes": ["Egress"], "ingress": [{}], "egress": [{}]})
    assert out["spec"]["types"] == ["Egress"]
    assert out["spec"]["ingress"] == [{"action": "Allow"}]
    assert out["spec"]["egress"] == [{"action": "Allow"}]


def test_peers_pod_namespace_both_and_ipblock() -> None:
    out = _np(
        {
            "podSelector": {},
            "ingress": [
                {
                    "from": [
                        {"podSelector": {"matchLabels": {"a": "b"}}},
                        {"namespaceSelector": {"matchLabels": {"ns": "y"}}},
                        {"podSelector": {"matchLabels": {"a": "b"}}, "namespaceSelector": {}},
                        {"ipBlock": {"cidr": "192.168.1.5/16", "except": ["192.168.3.0/24"]}},
                        {"ipBlock": {"cidr": "not-a-cidr"}},
                    ]
                }
            ],
        }
    )
    sources = [r.get("source") for r in out["spec"]["ingress"]]
    assert sources == [
        {"selector": f"{K8S} && a == 'b'"},
        {"selector": K8S, "namespaceSelector": "ns == 'y'"},
        {"selector": f"{K8S} && a == 'b'", "namespaceSelector": "all()"},
        {"nets": ["192.168.0.0/16"], "notNets": ["192.168.3.0/24"]},
        None,  # unparsable CIDR: an unrestricted peer, as upstream
    ]
    assert all(r["action"] == "Allow" and "protocol" not in r for r in out["spec"]["ingress"])


def test_ports_protocols_sorted_times_peers() -> None:
    out = _np(
        {
            "podSelector": {},
            "ingress": [
                {
                    "ports": [{"protocol": "UDP", "port": 90}, {"port": 80}],
                    "from": [
                        {"podSelector": {"matchLabels": {"k": "v"}}},
                        {"podSelector": {"matchLabels": {"k2": "v2"}}},
                    ],
                }
            ],
        }
    )
    got = [
        (r["protocol"], r["source"]["selector"], r["destination"]["ports"])
        for r in out["spec"]["ingress"]
    ]
    assert got == [
        ("TCP", f"{K8S} && k == 'v'", [80]),
        ("TCP", f"{K8S} && k2 == 'v2'", [80]),
        ("UDP", f"{K8S} && k == 'v'", [90]),
        ("UDP", f"{K8S} && k2 == 'v2'", [90]),
    ]


def test_named_ports_endport_sctp_and_all_ports_entry() -> None:
    out = _np(
        {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "ports": [
                        {"port": "http"},
                        {"port": 8000, "endPort": 8080},
                        {"protocol": "SCTP", "port": 5000},
                    ]
                },
                {"ports": [{"port": 80}, {}]},  # {} = TCP, every port: absorbs port 80
                {
                    "to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
                    "ports": [{"protocol": "UDP", "port": 53}],
                },
            ],
        }
    )
    assert out["spec"]["egress"] == [
        {"action": "Allow", "protocol": "SCTP", "destination": {"ports": [5000]}},
        {"action": "Allow", "protocol": "TCP", "destination": {"ports": ["http", "8000:8080"]}},
        {"action": "Allow", "protocol": "TCP"},
        {
            "action": "Allow",
            "protocol": "UDP",
            "destination": {"nets": ["10.0.0.0/8"], "ports": [53]},
        },
    ]
    assert "ingress" not in out["spec"]


def test_a_bad_port_drops_only_that_rule() -> None:
    out = _np(
        {
            "podSelector": {},
            "ingress": [
                {"ports": [{"port": 90, "endPort": 80}]},
                {"ports": [{"port": 81}]},
            ],
        }
    )
    assert out["spec"]["ingress"] == [
        {"action": "Allow", "protocol": "TCP", "destination": {"ports": [81]}}
    ]


def test_deny_all_has_no_rules() -> None:
    assert "ingress" not in _np({"podSelector": {}, "policyTypes": ["Ingress"]})["spec"]


# -- pods -----------------------------------------------------------------------------------


def _pod(**over: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {
            "name": "nginx-abc",
            "namespace": "default",
            "uid": "u1",
            "labels": {"app": "nginx"},
            "annotations": {},
        },
        "spec": {"nodeName": "node-1", "serviceAccountName": "sa1", "containers": []},
        "status": {"podIP": "10.0.0.5"},
    }
    for k, v in over.items():
        pod[k] = {**pod[k], **v}
    return pod


def test_wep_names_and_interface() -> None:
    assert pods.wep_name("node-1", "nginx-abc") == "node--1-k8s-nginx--abc-eth0"
    assert pods.parse_wep_name("node--1-k8s-nginx--abc-eth0") == ("node-1", "nginx-abc", "eth0")
    assert pods.parse_wep_name("node1-k8s-") is None
    assert pods.interface_name("default", "podA", "cali") == "cali7f94ce7c295"


def test_pod_to_wep() -> None:
    wep = pods.pod_to_wep(_pod())
    assert wep is not None
    assert wep["metadata"]["name"] == "node--1-k8s-nginx--abc-eth0"
    assert wep["metadata"]["uid"] == "u1"  # the pod's uid, unconverted
    assert wep["metadata"]["labels"] == {
        "app": "nginx",
        "projectcalico.org/namespace": "default",
        "projectcalico.org/orchestrator": "k8s",
        "projectcalico.org/serviceaccount": "sa1",
    }
    assert wep["spec"]["profiles"] == ["kns.default", "ksa.default.sa1"]
    assert wep["spec"]["ipNetworks"] == ["10.0.0.5/32"]
    parse_resource(wep)


def test_skipped_and_ipless_pods() -> None:
    assert pods.pod_to_wep(_pod(spec={"hostNetwork": True})) is None
    assert pods.pod_to_wep(_pod(spec={"nodeName": ""})) is None
    for finished in (
        _pod(status={"phase": "Succeeded"}),
        _pod(metadata={"deletionTimestamp": "x", "annotations": {pods.POD_IP: ""}}),
    ):
        wep = pods.pod_to_wep(finished)
        assert wep is not None and wep["spec"]["ipNetworks"] == []


def test_ip_priority() -> None:
    ann = {pods.POD_IPS: "10.9.0.1,fd00::1", pods.POD_IP: "10.8.0.1"}
    assert pods.pod_ips(_pod(status={"podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::2"}]})) == [
        "10.0.0.1/32",
        "fd00::2/128",
    ]
    assert pods.pod_ips(_pod(status={"podIP": ""}, metadata={"annotations": ann})) == [
        "10.9.0.1/32",
        "fd00::1/128",
    ]
    del ann[pods.POD_IPS]
    assert pods.pod_ips(_pod(status={"podIP": ""}, metadata={"annotations": ann})) == [
        "10.8.0.1/32"
    ]
    with pytest.raises(InvalidValueError):
        pods.pod_ips(_pod(status={"podIP": "bogus"}))


def test_named_ports_and_long_service_account() -> None:
    containers = [
        {
            "ports": [
                {"name": "http", "containerPort": 80},
                {"containerPort": 81},  # no name, no hostPort: not a named port
                {"containerPort": 82, "hostPort": 8082, "protocol": "UDP"},
                {"name": "weird", "containerPort": 83, "protocol": "FOO"},
            ]
        }
    ]
    init = [{"ports": [{"name": "s", "containerPort": 84, "protocol": "SCTP"}]}]
    long_sa = "s" * 63
    wep = pods.pod_to_wep(
        _pod(spec={"containers": containers, "initContainers": init, "serviceAccountName": long_sa})
    )
    assert wep is not None
    assert wep["spec"]["ports"] == [
        {"name": "http", "port": 80, "protocol": "TCP"},
        {"port": 82, "hostPort": 8082, "protocol": "UDP"},
        {"name": "s", "port": 84, "protocol": "SCTP"},
    ]
    assert "projectcalico.org/serviceaccount" not in wep["metadata"]["labels"]


# -- profiles and nodes ---------------------------------------------------------------------


def test_profiles() -> None:
    uid = "30316465-6365-4463-ad63-3564622d3638"
    ns = profiles.namespace_profile(
        {"metadata": {"name": "x", "uid": uid, "labels": {"kubernetes.io/metadata.name": "x"}}}
    )
    assert ns["metadata"]["name"] == "kns.x" and ns["metadata"]["uid"] == convert_uid(uid)
    assert ns["spec"] == {
        "ingress": [{"action": "Allow"}],
        "egress": [{"action": "Allow"}],
        "labelsToApply": {
            "pcns.kubernetes.io/metadata.name": "x",
            "pcns.projectcalico.org/name": "x",
        },
    }
    sa = profiles.service_account_profile(
        {"metadata": {"name": "a.b", "namespace": "y", "labels": {"l": "1"}}}
    )
    assert sa["metadata"]["name"] == "ksa.y.a.b"
    assert sa["spec"] == {"labelsToApply": {"pcsa.l": "1", "pcsa.projectcalico.org/name": "a.b"}}
    assert profiles.parse_profile_name("ksa.y.a.b") == ("sa", "y", "a.b")
    assert profiles.parse_profile_name("kns.x") == ("ns", "x", "")
    assert profiles.parse_profile_name("other") is None


def test_node_labels_shadowing_round_trip() -> None:
    k8s = {"metadata": {"name": "n1", "labels": {"role": "w", "shadowed": "k8s-value"}}}
    calico = {
        "metadata": {"labels": {"label1": "foo", "label2": "bar", "shadowed": "calico-value"}},
        "spec": {},
    }
    merged = nodes.merge_calico_into_k8s(k8s, calico)
    ann = merged["metadata"]["annotations"]
    assert json.loads(ann[nodes.LABELS]) == {"label1": "foo", "label2": "bar"}
    assert merged["metadata"]["labels"] == k8s["metadata"]["labels"]  # never touched
    back = nodes.k8s_node_to_calico(merged)
    assert back["metadata"]["labels"]["shadowed"] == "k8s-value"
    assert json.loads(back["metadata"]["annotations"][nodes.KUBE_LABELS]) == {
        "role": "w",
        "shadowed": "k8s-value",
    }


def test_node_fields_from_annotations() -> None:
    node = {
        "metadata": {
            "name": "n1",
            "uid": "u",
            "annotations": {
                "projectcalico.org/IPv4Address": "10.0.0.1/24",
                "projectcalico.org/ASNumber": "64512",
                "projectcalico.org/RouteReflectorClusterID": "not-an-ip",
                "projectcalico.org/IPv4VXLANTunnelAddr": "10.5.0.1",
                "projectcalico.org/WireguardPublicKey": "key=",
            },
        },
        "spec": {"podCIDRs": ["10.244.0.0/24"]},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "Hostname", "address": "n1"},
            ]
        },
    }
    out = nodes.k8s_node_to_calico(node)
    assert out["metadata"]["uid"] == "u"  # node uids are not converted
    assert out["spec"]["bgp"] == {"ipv4Address": "10.0.0.1/24", "asNumber": 64512}
    assert out["spec"]["ipv4VXLANTunnelAddr"] == "10.5.0.1"
    assert out["spec"]["addresses"] == [
        {"address": "10.0.0.1/24", "type": "CalicoNodeIP"},
        {"address": "10.0.0.1", "type": "InternalIP"},
    ]
    assert out["status"] == {"wireguardPublicKey": "key=", "podCIDRs": ["10.244.0.0/24"]}
    parse_resource(out)
    # Clearing BGP deletes its annotations.
    merged = nodes.merge_calico_into_k8s(node, {"metadata": {}, "spec": {}})
    assert not any("IPv4Address" in k or "ASNumber" in k for k in merged["metadata"]["annotations"])


@pytest.mark.parametrize(
    ("pod_cidr", "tunnel"),
    [
        ("10.0.0.0/24", "10.0.0.1"),
        ("10.0.0.5/24", "10.0.0.1"),  # the network address, not the written one
        ("10.1.2.0/23", "10.1.2.1"),
        ("10.0.0.255/32", "10.0.0.0"),  # the last byte wraps, as upstream's byte arithmetic
        ("fd00::/64", ""),
        ("junk", ""),
    ],
)
def test_host_local_tunnel_address(pod_cidr: str, tunnel: str) -> None:
    assert nodes.host_local_tunnel_addr(pod_cidr) == tunnel


def _host_local_node(**ann: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "n1",
            "annotations": {"projectcalico.org/IPv4Address": "10.0.0.1/24", **ann},
        },
        "spec": {"podCIDR": "10.244.3.0/24", "podCIDRs": ["10.244.3.0/24", "fd00:3::/64"]},
    }


def test_node_in_host_local_mode_takes_tunnel_addresses_from_the_pod_cidr() -> None:
    node = _host_local_node(
        **{
            "projectcalico.org/IPv4IPIPTunnelAddr": "10.9.9.9",
            "projectcalico.org/IPv4WireguardInterfaceAddr": "10.8.8.8",
        }
    )
    # Without usePodCIDR the annotations count.
    plain = nodes.k8s_node_to_calico(node)
    assert plain["spec"]["bgp"]["ipv4IPIPTunnelAddr"] == "10.9.9.9"
    assert plain["spec"]["wireguard"] == {"interfaceIPv4Address": "10.8.8.8"}
    # With it: the pod CIDR's address, and no WireGuard address until a public key is set.
    out = nodes.k8s_node_to_calico(node, use_pod_cidr=True)
    assert out["spec"]["bgp"] == {"ipv4Address": "10.0.0.1/24", "ipv4IPIPTunnelAddr": "10.244.3.1"}
    assert "wireguard" not in out["spec"]
    assert out["status"]["podCIDRs"] == ["10.244.3.0/24", "fd00:3::/64"]
    parse_resource(out)
    keyed = nodes.k8s_node_to_calico(
        _host_local_node(**{"projectcalico.org/WireguardPublicKey": "key="}), use_pod_cidr=True
    )
    assert keyed["spec"]["wireguard"] == {"interfaceIPv4Address": "10.244.3.1"}
    # No spec.podCIDR: host-local mode changes nothing.
    bare = copy.deepcopy(node)
    del bare["spec"]["podCIDR"]
    assert nodes.k8s_node_to_calico(bare, use_pod_cidr=True) == nodes.k8s_node_to_calico(bare)


def _fip_pod(annotation: str | None, status: dict[str, Any]) -> dict[str, Any]:
    ann = {} if annotation is None else {pods.FLOATING_IPS: annotation}
    return _pod(metadata={"annotations": ann}, status=status)


DUAL = {"podIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}]}


@pytest.mark.parametrize(
    ("annotation", "status", "nats"),
    [
        ('["1.1.1.1"]', {"podIP": "10.0.0.5"}, [("10.0.0.5", "1.1.1.1")]),
        (
            '["1.1.1.1", "fd00:f::1", "2.2.2.2"]',
            DUAL,
            [("10.0.0.5", "1.1.1.1"), ("fd00::5", "fd00:f::1"), ("10.0.0.5", "2.2.2.2")],
        ),
        ('["fd00:f::1"]', {"podIP": "10.0.0.5"}, None),  # no IPv6 pod address: skipped
        ("[]", {"podIP": "10.0.0.5"}, None),
        (None, {"podIP": "10.0.0.5"}, None),
        ("not json", {"podIP": ""}, None),  # a pod without IPs never reads the annotation
    ],
)
def test_floating_ips_become_ip_nats(
    annotation: str | None, status: dict[str, Any], nats: list[tuple[str, str]] | None
) -> None:
    wep = pods.pod_to_wep(_fip_pod(annotation, status))
    assert wep is not None
    got = wep["spec"].get("ipNATs")
    want = None if nats is None else [{"internalIP": i, "externalIP": e} for i, e in nats]
    assert got == want
    parse_resource(wep)


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        ("not json", "as a JSON list of strings"),
        ('{"a": 1}', "as a JSON list of strings"),
        ("", "as a JSON list of strings"),  # present but empty: an error, as upstream
        ('["1.1.1.1", 7]', "as a JSON list of strings"),
    ],
)
def test_bad_floating_ips_annotation_is_an_error(annotation: str, message: str) -> None:
    with pytest.raises(InvalidValueError, match=message):
        pods.pod_to_wep(_fip_pod(annotation, {"podIP": "10.0.0.5"}))


def test_floating_ip_needs_a_host_address() -> None:
    with pytest.raises(InvalidValueError, match="Mask size is 24, not 32"):
        pods.floating_ip_nats('["1.1.1.1"]', ["10.0.0.0/24"])
    with pytest.raises(InvalidValueError, match="not a valid IPv6: Mask size is 64, not 128"):
        pods.floating_ip_nats('["1.1.1.1"]', ["10.0.0.5/32", "fd00::/64"])
