"""ClusterNetworkPolicy -> GlobalNetworkPolicy in the kube-admin / kube-baseline tiers."""

from __future__ import annotations

from typing import Any

from calico.api import parse_resource
from calico.datastore.kubernetes.native.clusternetworkpolicy import (
    cluster_network_policy_to_calico as convert,
)

K8S = "projectcalico.org/orchestrator == 'k8s'"


def _cnp(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "tier": "Admin",
        "priority": 10,
        "subject": {"namespaces": {"matchLabels": {"team": "a"}}},
    }
    base.update(spec)
    return {"metadata": {"name": "cnp1"}, "spec": base}


def test_tiers_order_subject_and_types() -> None:
    out = convert(_cnp())
    assert out is not None
    assert out["metadata"] == {"name": "cnp1"}
    assert out["spec"] == {
        "tier": "kube-admin",
        "order": 10.0,
        "namespaceSelector": "team == 'a'",
        "selector": K8S,
        "types": [],
    }
    pods = convert(
        _cnp(
            tier="Baseline",
            subject={
                "pods": {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "db"}}}
            },
        )
    )
    assert pods is not None and pods["spec"]["tier"] == "kube-baseline"
    assert (pods["spec"]["namespaceSelector"], pods["spec"]["selector"]) == (
        "all()",
        f"{K8S} && app == 'db'",
    )


def test_tombstones() -> None:
    assert convert(_cnp(tier="Other")) is None
    assert convert(_cnp(subject={})) is None


def test_rules_actions_protocols_and_peers() -> None:
    out = convert(
        _cnp(
            ingress=[
                {
                    "name": "from-b",
                    "action": "Accept",
                    "from": [{"namespaces": {"matchLabels": {"ns": "b"}}}],
                    "protocols": [
                        {"tcp": {"destinationPort": {"number": 80}}},
                        {"udp": {"destinationPort": {"range": {"start": 5000, "end": 5010}}}},
                        {"tcp": {"destinationPort": {"number": 81}}},
                    ],
                }
            ],
            egress=[
                {"action": "Deny", "to": [{"networks": ["10.0.0.5/8"]}]},
                {
                    "action": "Pass",
                    "to": [{"namespaces": {}}],
                    "protocols": [{"destinationNamedPort": "http"}],
                },  # unsupported: fail closed
                {"action": "Accept", "to": [{}]},
            ],  # no peer field: dropped (Accept)
        )
    )
    assert out is not None
    assert out["spec"]["types"] == ["Ingress", "Egress"]
    meta = {"annotations": {"name": "from-b"}}
    assert out["spec"]["ingress"] == [
        {
            "action": "Allow",
            "metadata": meta,
            "protocol": "TCP",
            "source": {"namespaceSelector": "ns == 'b'"},
            "destination": {"ports": ["80:81"]},
        },
        {
            "action": "Allow",
            "metadata": meta,
            "protocol": "UDP",
            "source": {"namespaceSelector": "ns == 'b'"},
            "destination": {"ports": ["5000:5010"]},
        },
    ]
    assert out["spec"]["egress"] == [
        {"action": "Deny", "destination": {"nets": ["10.0.0.0/8"]}},
        {"action": "Deny"},
    ]
    parse_resource(out)
