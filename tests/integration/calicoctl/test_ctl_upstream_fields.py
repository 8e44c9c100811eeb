"""The v3 fields and kinds added to match upstream round-trip through `calicoctl create` and
`get -o yaml` on each datastore, and their validation errors reach the user as a message."""

from __future__ import annotations

import pytest
import yaml
from ctl_helpers import Ctl

DOCS = {
    ("bgpconfig", "default", None): {
        "kind": "BGPConfiguration",
        "spec": {"programClusterRoutes": "EnabledNoEncapOnly"},
    },
    ("bgpfilter", "f1", None): {
        "kind": "BGPFilter",
        "spec": {
            "exportV4": [
                {
                    "cidr": "10.0.0.0/8",
                    "matchOperator": "In",
                    "peerType": "eBGP",
                    "communities": {"values": ["65000:100"]},
                    "asPathPrefix": [65000, 65001],
                    "priority": 512,
                    "action": "Accept",
                    "operations": [
                        {"addCommunity": {"value": "65000:1:2"}},
                        {"prependASPath": {"prefix": [65000]}},
                        {"setPriority": {"value": 100}},
                    ],
                }
            ],
            "importV6": [{"peerType": "iBGP", "action": "Reject"}],
        },
    },
    ("felixconfig", "default", None): {
        "kind": "FelixConfiguration",
        "spec": {
            "bpfIPFragTimeout": "30s",
            "bpfIPFragmentReassemblyEnabled": False,
            "bpfOverlayHostSourceIP": "HostAddress",
            "istioAmbientMode": "Enabled",
            "istioDSCPMark": "AF21",
            "liveMigrationRouteConvergenceTime": "45s",
            "localSubnetL2Reachability": "PodsAndLoadBalancers",
            "localSubnetL2ReachabilityRefreshInterval": "2m",
            "programClusterRoutes": "Enabled",
        },
    },
    ("workloadendpoint", "node1-k8s-pod1-eth0", "ns1"): {
        "kind": "WorkloadEndpoint",
        "spec": {
            "interfaceName": "cali0123456789a",
            "qosControls": {
                "ingressBandwidth": 1000000,
                "egressBurst": 34359738360,
                "ingressPacketRate": 10000,
                "egressMaxConnections": 4294967295,
                "dscp": 46,
            },
        },
    },
    ("qospolicy", "mark-db", None): {
        "kind": "QoSPolicy",
        "spec": {
            "selector": "app == 'db'",
            "egress": [{"action": {"dscp": "EF"}, "protocol": "TCP"}],
        },
    },
    ("datastoremigration", "v1-to-v3", None): {
        "kind": "DatastoreMigration",
        "spec": {"type": "V1ToV3"},
    },
}


def manifest(name: str, namespace: str | None, body: dict) -> str:
    meta: dict = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return yaml.safe_dump({"apiVersion": "projectcalico.org/v3", "metadata": meta, **body})


@pytest.mark.parametrize(("key", "body"), DOCS.items(), ids=[k[0] for k in DOCS])
def test_new_fields_round_trip(ctl: Ctl, key: tuple[str, str, str | None], body: dict) -> None:
    alias, name, namespace = key
    r = ctl("create", "-f", "-", stdin=manifest(name, namespace, body))
    assert r.code == 0, r
    args = ["get", alias, name, "-o", "yaml"] + (["-n", namespace] if namespace else [])
    got = ctl(*args)
    assert got.code == 0, got
    stored = yaml.safe_load(got.out)
    assert stored["kind"] == body["kind"]
    assert stored["spec"] == body["spec"]


def test_tier_status_round_trips(ctl: Ctl) -> None:
    status = {
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "lastTransitionTime": "2025-01-02T03:04:05Z",
                "reason": "Ready",
                "message": "",
            }
        ]
    }
    body = {"kind": "Tier", "spec": {"order": 100}, "status": status}
    assert ctl("create", "-f", "-", stdin=manifest("t1", None, body)).code == 0
    stored = yaml.safe_load(ctl("get", "tier", "t1", "-o", "yaml").out)
    assert stored["status"] == status


@pytest.mark.parametrize(
    ("body", "wants"),
    [
        (
            {
                "kind": "BGPFilter",
                "spec": {
                    "exportV4": [
                        {"action": "Reject", "operations": [{"setPriority": {"value": 1}}]}
                    ]
                },
            },
            "operations may only be used with action Accept",
        ),
        (
            {
                "kind": "BGPFilter",
                "spec": {"importV4": [{"source": "RemotePeers", "action": "Accept"}]},
            },
            "source is not applicable to import rules",
        ),
        (
            {"kind": "BGPConfiguration", "spec": {"programClusterRoutes": "Sometimes"}},
            "programClusterRoutes",
        ),
        ({"kind": "FelixConfiguration", "spec": {"istioDSCPMark": 64}}, "DSCP value 64"),
    ],
)
def test_new_field_errors_reach_the_user(ctl: Ctl, body: dict, wants: str) -> None:
    name = "default" if body["kind"] != "BGPFilter" else "f2"
    r = ctl("create", "-f", "-", stdin=manifest(name, None, body))
    assert r.code == 1 and wants in r.err, r
    assert "Traceback" not in r.err
