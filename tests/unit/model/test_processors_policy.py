"""Policy, tier and rule conversion: worked v3 inputs and their exact v1 keys/values."""

from __future__ import annotations

from typing import Any

import pytest
from processor_json import at_path

from calico.model import processors as p

global_network_policy = at_path(p.global_network_policy)
network_policy = at_path(p.network_policy)
staged_global_network_policy = at_path(p.staged_global_network_policy)
staged_kubernetes_network_policy = at_path(p.staged_kubernetes_network_policy)
staged_network_policy = at_path(p.staged_network_policy)
tier = at_path(p.tier)

V3 = "/calico/resources/v3/projectcalico.org/"


def res(kind: str, name: str, spec: dict[str, Any], ns: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if ns:
        meta["namespace"] = ns
    return {"apiVersion": "projectcalico.org/v3", "kind": kind, "metadata": meta, "spec": spec}


def test_namespaced_policy_selector_and_rules() -> None:
    spec = {
        "order": 10,
        "selector": "app == 'web'",
        "serviceAccountSelector": "role == 'fe'",
        "ingress": [
            {
                "action": "Allow",
                "protocol": "TCP",
                "source": {"selector": "app == 'lb'", "notNets": ["10.1.0.0/16"]},
                "destination": {"ports": [80, "8000:8080", "http"], "notPorts": [81]},
            },
            {"action": "Pass", "source": {"namespaceSelector": "all()"}},
            {"action": "Deny", "source": {"notSelector": "bad == 'yes'"}},
        ],
        "egress": [
            {
                "action": "Log",
                "protocol": "ICMP",
                "icmp": {"type": 8, "code": 0},
                "notICMP": {"type": 3},
                "destination": {"serviceAccounts": {"names": ["b", "a"], "selector": "x == 'y'"}},
            },
            {"action": "Allow", "notProtocol": "UDP", "destination": {"nets": ["10.0.0.0/8"]}},
        ],
    }
    out = network_policy(V3 + "networkpolicies/prod/web", res("NetworkPolicy", "web", spec, "prod"))
    assert out == {
        "/calico/v1/policy/NetworkPolicy/prod/web": {
            "namespace": "prod",
            "tier": "default",
            "order": 10.0,
            "selector": "((app == 'web') && projectcalico.org/namespace == 'prod') "
            '&& pcsa.role == "fe"',
            "types": ["ingress", "egress"],
            "inbound_rules": [
                {
                    "action": "allow",
                    "protocol": "tcp",
                    "src_selector": "(projectcalico.org/namespace == 'prod') && (app == 'lb')",
                    "orig_src_selector": "app == 'lb'",
                    "!src_nets": ["10.1.0.0/16"],
                    "dst_ports": [80, "8000:8080", "http"],
                    "!dst_ports": [81],
                },
                {
                    "action": "next-tier",
                    "src_selector": "has(projectcalico.org/namespace)",
                    "orig_src_namespace_selector": "all()",
                },
                {
                    # notSelector alone still confines the rule to the policy's namespace.
                    "action": "deny",
                    "src_selector": "projectcalico.org/namespace == 'prod'",
                    "!src_selector": "bad == 'yes'",
                    "!orig_src_selector": "bad == 'yes'",
                },
            ],
            "outbound_rules": [
                {
                    "action": "log",
                    "protocol": "icmp",
                    "icmp_type": 8,
                    "icmp_code": 0,
                    "!icmp_type": 3,
                    "dst_selector": "(projectcalico.org/namespace == 'prod') && "
                    '((pcsa.x == "y") && (projectcalico.org/serviceaccount in {"a", "b"}))',
                    "orig_dst_service_acct_names": ["b", "a"],
                    "orig_dst_service_acct_selector": "x == 'y'",
                },
                {"action": "allow", "!protocol": "udp", "dst_nets": ["10.0.0.0/8"]},
            ],
        }
    }


def test_namespaced_policy_without_selector_selects_its_namespace() -> None:
    out = network_policy(
        V3 + "networkpolicies/ns1/p", res("NetworkPolicy", "p", {"tier": "default"}, "ns1")
    )
    value = out["/calico/v1/policy/NetworkPolicy/ns1/p"]
    assert value == {
        "namespace": "ns1",
        "tier": "default",
        "selector": "projectcalico.org/namespace == 'ns1'",
        "types": ["ingress"],
    }


def test_global_policy_namespace_and_service_account_selectors() -> None:
    spec = {
        "selector": "all()",
        "namespaceSelector": "env == 'prod'",
        "serviceAccountSelector": "all()",
        "doNotTrack": True,
        "applyOnForward": True,
        "order": 5.5,
        "performanceHints": ["AssumeNeededOnEveryNode"],
        "ingress": [
            {"action": "Allow", "source": {"namespaceSelector": "global()"}},
            {"action": "Allow", "source": {"namespaceSelector": "team in {'a', 'b'}"}},
            {"action": "Allow", "source": {"selector": "has(x)"}},
        ],
    }
    out = global_network_policy(
        V3 + "globalnetworkpolicies/g1", res("GlobalNetworkPolicy", "g1", spec)
    )
    assert out == {
        "/calico/v1/policy/GlobalNetworkPolicy//g1": {
            "tier": "default",
            "order": 5.5,
            # all() is rewritten by text replacement, also inside the main selector (upstream).
            "selector": '((has(projectcalico.org/namespace)) && pcns.env == "prod") '
            "&& has(projectcalico.org/serviceaccount)",
            "untracked": True,
            "apply_on_forward": True,
            "types": ["ingress"],
            "performance_hints": ["AssumeNeededOnEveryNode"],
            "inbound_rules": [
                {
                    "action": "allow",
                    "src_selector": "!has(projectcalico.org/namespace)",
                    "orig_src_namespace_selector": "global()",
                },
                {
                    "action": "allow",
                    "src_selector": 'pcns.team in {"a", "b"}',
                    "orig_src_namespace_selector": "team in {'a', 'b'}",
                },
                # A global policy's rule selector is not namespaced.
                {"action": "allow", "src_selector": "has(x)", "orig_src_selector": "has(x)"},
            ],
        }
    }


def test_global_policy_pre_dnat_and_tier() -> None:
    spec = {
        "tier": "security",
        "selector": "role == 'edge'",
        "preDNAT": True,
        "applyOnForward": True,
        "ingress": [{"action": "Deny", "ipVersion": 4, "source": {"nets": ["192.168.0.1/32"]}}],
    }
    out = global_network_policy(
        V3 + "globalnetworkpolicies/security.edge",
        res("GlobalNetworkPolicy", "security.edge", spec),
    )
    assert out == {
        "/calico/v1/policy/GlobalNetworkPolicy//security.edge": {
            "tier": "security",
            "selector": "role == 'edge'",
            "pre_dnat": True,
            "apply_on_forward": True,
            "types": ["ingress"],
            "inbound_rules": [{"action": "deny", "ip_version": 4, "src_nets": ["192.168.0.1/32"]}],
        }
    }


def test_http_and_rule_metadata_pass_through() -> None:
    spec = {
        "ingress": [
            {
                "action": "Allow",
                "http": {"methods": ["GET"], "paths": [{"prefix": "/api"}]},
                "metadata": {"annotations": {"note": "x"}},
            }
        ]
    }
    out = global_network_policy(
        V3 + "globalnetworkpolicies/h", res("GlobalNetworkPolicy", "h", spec)
    )
    rule = out["/calico/v1/policy/GlobalNetworkPolicy//h"]["inbound_rules"][0]
    assert rule == {
        "action": "allow",
        "http": {"methods": ["GET"], "paths": [{"prefix": "/api"}]},
        "metadata": {"annotations": {"note": "x"}},
    }
    assert out["/calico/v1/policy/GlobalNetworkPolicy//h"]["selector"] == ""


def test_staged_policies() -> None:
    spec = {"selector": "a == 'b'", "egress": [{"action": "Allow"}]}
    out = staged_network_policy(
        V3 + "stagednetworkpolicies/ns/s", res("StagedNetworkPolicy", "s", spec, "ns")
    )
    assert out == {
        "/calico/v1/policy/StagedNetworkPolicy/ns/s": {
            "namespace": "ns",
            "tier": "default",
            "selector": "(a == 'b') && projectcalico.org/namespace == 'ns'",
            "types": ["egress"],
            "outbound_rules": [{"action": "allow"}],
            "staged_action": "Set",
        }
    }
    gspec = {"stagedAction": "Learn", "selector": "all()"}
    out = staged_global_network_policy(
        V3 + "stagedglobalnetworkpolicies/g", res("StagedGlobalNetworkPolicy", "g", gspec)
    )
    assert out["/calico/v1/policy/StagedGlobalNetworkPolicy//g"]["staged_action"] == "Learn"


@pytest.mark.parametrize(
    ("processor", "kind", "plural", "ns"),
    [
        (staged_network_policy, "StagedNetworkPolicy", "stagednetworkpolicies", "ns"),
        (
            staged_global_network_policy,
            "StagedGlobalNetworkPolicy",
            "stagedglobalnetworkpolicies",
            None,
        ),
        (
            staged_kubernetes_network_policy,
            "StagedKubernetesNetworkPolicy",
            "stagedkubernetesnetworkpolicies",
            "ns",
        ),
    ],
)
def test_staged_delete_produces_nothing(
    processor: Any, kind: str, plural: str, ns: str | None
) -> None:
    path = V3 + plural + (f"/{ns}/x" if ns else "/x")
    assert processor(path, res(kind, "x", {"stagedAction": "Delete"}, ns)) == {}


def test_staged_kubernetes_policy() -> None:
    spec = {
        "podSelector": {"matchLabels": {"app": "db"}},
        "ingress": [
            {
                "from": [
                    {"podSelector": {"matchLabels": {"app": "api"}}},
                    {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}},
                ],
                "ports": [{"port": 5432}],
            }
        ],
    }
    out = staged_kubernetes_network_policy(
        V3 + "stagedkubernetesnetworkpolicies/ns/k",
        res("StagedKubernetesNetworkPolicy", "k", spec, "ns"),
    )
    assert out == {
        "/calico/v1/policy/StagedKubernetesNetworkPolicy/ns/k": {
            "namespace": "ns",
            "tier": "default",
            "order": 1000.0,
            "selector": "(projectcalico.org/orchestrator == 'k8s' && app == 'db') "
            "&& projectcalico.org/namespace == 'ns'",
            "types": ["ingress"],
            "staged_action": "Set",
            "inbound_rules": [
                {
                    "action": "allow",
                    "protocol": "tcp",
                    "src_selector": "(projectcalico.org/namespace == 'ns') && "
                    "(projectcalico.org/orchestrator == 'k8s' && app == 'api')",
                    "orig_src_selector": "projectcalico.org/orchestrator == 'k8s' && app == 'api'",
                    "dst_ports": [5432],
                },
                {
                    "action": "allow",
                    "protocol": "tcp",
                    "src_nets": ["10.0.0.0/8"],
                    "!src_nets": ["10.1.0.0/16"],
                    "dst_ports": [5432],
                },
            ],
        }
    }


def test_tier() -> None:
    out = tier(
        V3 + "tiers/security", res("Tier", "security", {"order": 100, "defaultAction": "Pass"})
    )
    assert out == {
        "/calico/v1/policy/tier/security/metadata": {"order": 100.0, "defaultAction": "Pass"}
    }
    out = tier(V3 + "tiers/last", res("Tier", "last", {}))
    assert out == {"/calico/v1/policy/tier/last/metadata": {"defaultAction": "Deny"}}


def test_invalid_policy_is_a_value_error() -> None:
    bad = res("GlobalNetworkPolicy", "g", {"selector": "this is not (a selector"})
    with pytest.raises(ValueError):
        global_network_policy(V3 + "globalnetworkpolicies/g", bad)
    with pytest.raises(ValueError):
        global_network_policy(V3 + "networkpolicies/ns/g", bad)
