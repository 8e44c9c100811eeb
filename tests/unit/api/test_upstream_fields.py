"""The v3 fields and kinds added to match upstream's current API: shape on the wire, boundaries
and error paths (BGPConfiguration programClusterRoutes, BGPFilter rule matches and operations,
the newer FelixConfiguration parameters, WorkloadEndpoint qosControls, Tier status, QoSPolicy,
DatastoreMigration)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from calico.api import dump_resources, kind_class, load_documents, load_file
from calico.api.base import Resource
from calico.api.felixconfig import FelixConfigurationSpec
from calico.api.kind_table import KINDS
from calico.model.processors.confignames import spec_params

CLUSTER_ROUTES = ("Disabled", "EnabledIPIPOnly", "EnabledNoEncapOnly", "Enabled")


def doc(kind: str, spec: dict[str, Any], name: str = "x") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if KINDS[kind].namespaced:
        meta["namespace"] = "default"
    return {"apiVersion": "projectcalico.org/v3", "kind": kind, "metadata": meta, "spec": spec}


def load(kind: str, spec: dict[str, Any], name: str = "x", **top: Any) -> Resource:
    cls = kind_class(kind)
    assert cls is not None
    return cls.model_validate({**doc(kind, spec, name), **top})


def errors(kind: str, spec: dict[str, Any], name: str = "x", **top: Any) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as info:
        load(kind, spec, name, **top)
    return [
        (".".join(str(p) for p in e["loc"]), e["msg"].removeprefix("Value error, "))
        for e in info.value.errors()
    ]


def wire_spec(kind: str, spec: dict[str, Any], name: str = "x") -> dict[str, Any]:
    out: dict[str, Any] = load(kind, spec, name).to_wire()["spec"]
    return out


# --- BGPConfiguration.programClusterRoutes ----------------------------------------------------


@pytest.mark.parametrize("value", CLUSTER_ROUTES)
def test_bgp_program_cluster_routes_values(value: str) -> None:
    spec = wire_spec("BGPConfiguration", {"programClusterRoutes": value}, "default")
    assert spec == {"programClusterRoutes": value}


def test_bgp_program_cluster_routes_unset_is_omitted_and_bad_value_refused() -> None:
    assert wire_spec("BGPConfiguration", {}, "default") == {}
    [(loc, msg)] = errors("BGPConfiguration", {"programClusterRoutes": "enabled"}, "default")
    assert loc == "spec.programClusterRoutes" and "'Enabled'" in msg


def test_bgp_program_cluster_routes_on_node_config() -> None:
    # Not a default-only field upstream: a per-node BGPConfiguration may carry it.
    assert wire_spec("BGPConfiguration", {"programClusterRoutes": "Disabled"}, "node.n1") == {
        "programClusterRoutes": "Disabled"
    }


# --- BGPFilter rules ----------------------------------------------------------------------------


def rule(**fields: Any) -> dict[str, Any]:
    return {"action": "Accept", **fields}


def filter_errors(direction: str, r: dict[str, Any]) -> list[tuple[str, str]]:
    return errors("BGPFilter", {direction: [r]})


def test_bgp_filter_full_rule_round_trips() -> None:
    full = {
        "cidr": "10.0.0.0/8",
        "matchOperator": "In",
        "prefixLength": {"min": 16, "max": 24},
        "source": "RemotePeers",
        "interface": "eth*",
        "peerType": "eBGP",
        "communities": {"values": ["65000:100"]},
        "asPathPrefix": [65000, 65001],
        "priority": 512,
        "action": "Accept",
        "operations": [
            {"addCommunity": {"value": "65000:1:2"}},
            {"prependASPath": {"prefix": [65000, 65000]}},
            {"setPriority": {"value": 100}},
        ],
    }
    v6 = {**full, "cidr": "fd00::/8", "prefixLength": {"min": 48, "max": 64}}
    spec = {"exportV4": [full], "exportV6": [v6]}
    assert wire_spec("BGPFilter", spec) == spec


@pytest.mark.parametrize("peer_type", ["eBGP", "iBGP"])
def test_bgp_filter_peer_type(peer_type: str) -> None:
    assert wire_spec("BGPFilter", {"importV4": [rule(peerType=peer_type)]}) == {
        "importV4": [{"peerType": peer_type, "action": "Accept"}]
    }


@pytest.mark.parametrize("bad", ["ebgp", "IBGP", "external", ""])
def test_bgp_filter_peer_type_is_exact(bad: str) -> None:
    [(loc, _)] = filter_errors("importV4", rule(peerType=bad))
    assert loc == "spec.importV4.0.peerType"


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("0:0", True),
        ("65535:65535", True),
        ("65536:1", False),  # standard parts are 16-bit
        ("1:65536", False),
        ("4294967295:4294967295:4294967295", True),  # large parts are 32-bit
        ("4294967296:1:1", False),
        ("01:1", False),  # upstream's pattern: no leading zeros
        ("1:2:3:4", False),
        ("1", False),
        ("a:b", False),
        ("4294967295:4294967295:42949672950", False),  # 33 characters, and too big
    ],
)
def test_bgp_filter_community_values(value: str, ok: bool) -> None:
    for r in (
        rule(communities={"values": [value]}),
        rule(operations=[{"addCommunity": {"value": value}}]),
    ):
        if ok:
            load("BGPFilter", {"exportV4": [r]})
        else:
            [(loc, msg)] = filter_errors("exportV4", r)
            assert "community value" in msg, (loc, msg)


@pytest.mark.parametrize("values", [[], ["1:1", "2:2"]])
def test_bgp_filter_community_match_takes_exactly_one_value(values: list[str]) -> None:
    [(loc, _)] = filter_errors("exportV4", rule(communities={"values": values}))
    assert loc == "spec.exportV4.0.communities.values"


def test_bgp_filter_community_match_requires_values() -> None:
    [(loc, msg)] = filter_errors("exportV4", rule(communities={}))
    assert (loc, msg) == ("spec.exportV4.0.communities.values", "Field required")


@pytest.mark.parametrize(("priority", "ok"), [(0, False), (1, True), (2147483646, True)])
def test_bgp_filter_priority_bounds(priority: int, ok: bool) -> None:
    for r in (rule(priority=priority), rule(operations=[{"setPriority": {"value": priority}}])):
        if ok:
            load("BGPFilter", {"exportV4": [r]})
        else:
            assert filter_errors("exportV4", r)
    assert filter_errors("exportV4", rule(priority=2147483647))


def test_bgp_filter_as_path_prefix_takes_dotted_and_refuses_bad_asns() -> None:
    spec = wire_spec("BGPFilter", {"exportV4": [rule(asPathPrefix=["1.10", 65000])]})
    assert spec["exportV4"][0]["asPathPrefix"] == [65546, 65000]
    [(loc, _)] = filter_errors("exportV4", rule(asPathPrefix=[4294967296]))
    assert loc.startswith("spec.exportV4.0.asPathPrefix")


@pytest.mark.parametrize(("count", "ok"), [(0, False), (1, True), (10, True), (11, False)])
def test_bgp_filter_prepend_prefix_length(count: int, ok: bool) -> None:
    r = rule(operations=[{"prependASPath": {"prefix": [65000] * count}}])
    if ok:
        load("BGPFilter", {"exportV4": [r]})
    else:
        [(loc, _)] = filter_errors("exportV4", r)
        assert loc == "spec.exportV4.0.operations.0.prependASPath.prefix"


@pytest.mark.parametrize(("count", "ok"), [(0, False), (1, True), (10, True), (11, False)])
def test_bgp_filter_operations_list_length(count: int, ok: bool) -> None:
    r = rule(operations=[{"setPriority": {"value": 5}}] * count)
    if ok:
        load("BGPFilter", {"exportV4": [r]})
    else:
        [(loc, _)] = filter_errors("exportV4", r)
        assert loc == "spec.exportV4.0.operations"


def test_bgp_filter_operations_only_with_accept() -> None:
    r = {"action": "Reject", "operations": [{"setPriority": {"value": 5}}]}
    for direction in ("exportV4", "importV6"):
        [(loc, msg)] = filter_errors(direction, r)
        assert (loc, msg) == (
            f"spec.{direction}.0.operations",
            "operations may only be used with action Accept",
        )
    load("BGPFilter", {"exportV4": [{"action": "Reject"}]})


@pytest.mark.parametrize(
    "op",
    [
        {},
        {"addCommunity": {"value": "1:1"}, "setPriority": {"value": 5}},
        {
            "addCommunity": {"value": "1:1"},
            "prependASPath": {"prefix": [1]},
            "setPriority": {"value": 5},
        },
    ],
)
def test_bgp_filter_operation_sets_exactly_one_field(op: dict[str, Any]) -> None:
    [(loc, msg)] = filter_errors("exportV4", rule(operations=[op]))
    assert (loc, msg) == ("spec.exportV4.0.operations.0", "exactly one operation must be set")


def test_bgp_filter_operation_fields_are_required() -> None:
    for op, where in (
        ({"addCommunity": {}}, "addCommunity.value"),
        ({"prependASPath": {}}, "prependASPath.prefix"),
        ({"setPriority": {}}, "setPriority.value"),
    ):
        [(loc, msg)] = filter_errors("exportV4", rule(operations=[op]))
        assert (loc, msg) == (f"spec.exportV4.0.operations.0.{where}", "Field required")


def test_bgp_filter_source_not_applicable_to_import_rules() -> None:
    for direction in ("importV4", "importV6"):
        [(loc, msg)] = filter_errors(direction, rule(source="RemotePeers"))
        assert (loc, msg) == (
            f"spec.{direction}.0.source",
            "source is not applicable to import rules",
        )
    load("BGPFilter", {"exportV4": [rule(source="RemotePeers")]})


# --- FelixConfiguration -------------------------------------------------------------------------


NEW_FELIX = {
    "bpfIPFragTimeout": "30s",
    "bpfIPFragmentReassemblyEnabled": False,
    "bpfOverlayHostSourceIP": "HostAddress",
    "istioAmbientMode": "Enabled",
    "istioDSCPMark": 23,
    "liveMigrationRouteConvergenceTime": "30s",
    "localSubnetL2Reachability": "PodsAndLoadBalancers",
    "localSubnetL2ReachabilityRefreshInterval": "2m",
    "programClusterRoutes": "EnabledIPIPOnly",
}


def test_felix_new_parameters_round_trip() -> None:
    assert wire_spec("FelixConfiguration", NEW_FELIX, "default") == NEW_FELIX


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("bpfIPFragTimeout", "30"),
        ("bpfOverlayHostSourceIP", "tunneladdress"),
        ("istioAmbientMode", "On"),
        ("liveMigrationRouteConvergenceTime", "soon"),
        ("localSubnetL2Reachability", "Enabled"),
        ("localSubnetL2ReachabilityRefreshInterval", "1 minute"),
        ("programClusterRoutes", "EnabledVXLANOnly"),
        ("bpfIPFragmentReassemblyEnabled", "maybe"),
    ],
)
def test_felix_new_parameters_refuse_bad_values(field: str, bad: Any) -> None:
    [(loc, _)] = errors("FelixConfiguration", {field: bad}, "default")
    assert loc == f"spec.{field}"


@pytest.mark.parametrize("value", CLUSTER_ROUTES)
def test_felix_program_cluster_routes_takes_all_four(value: str) -> None:
    spec = wire_spec("FelixConfiguration", {"programClusterRoutes": value}, "default")
    assert spec == {"programClusterRoutes": value}


@pytest.mark.parametrize(
    ("value", "stored"),
    [(0, 0), (63, 63), ("23", 23), ("EF", "EF"), ("AF11", "AF11"), ("CS6", "CS6"), ("DF", "DF")],
)
def test_dscp_values_accepted(value: Any, stored: Any) -> None:
    spec = wire_spec("FelixConfiguration", {"istioDSCPMark": value}, "default")
    assert spec == {"istioDSCPMark": stored}


@pytest.mark.parametrize("value", [-1, 64, "ef", "CS7", "AF14", "", True, 1.5])
def test_dscp_values_refused(value: Any) -> None:
    [(loc, msg)] = errors("FelixConfiguration", {"istioDSCPMark": value}, "default")
    assert loc == "spec.istioDSCPMark" and "DSCP value" in msg


@pytest.mark.parametrize(("count", "ok"), [(7, True), (8, False)])
def test_felix_kube_node_port_ranges_at_most_seven(count: int, ok: bool) -> None:
    spec = {"kubeNodePortRanges": [f"{30000 + i}:{30000 + i}" for i in range(count)]}
    if ok:
        load("FelixConfiguration", spec, "default")
    else:
        [(loc, _)] = errors("FelixConfiguration", spec, "default")
        assert loc == "spec.kubeNodePortRanges"


@pytest.mark.parametrize("name", ["default", "node.n1"])
def test_felix_node_selector_refused_on_named_placements(name: str) -> None:
    [(loc, msg)] = errors("FelixConfiguration", {"nodeSelector": "all()"}, name)
    assert loc == "spec.nodeSelector"
    assert msg == (
        "nodeSelector must not be set on the 'default' or per-node ('node.*') FelixConfiguration"
    )
    load("FelixConfiguration", {"nodeSelector": "all()"}, "rack-1")


def test_felix_node_selector_length_limit() -> None:
    sel = "a == '" + "x" * 1017 + "'"
    assert len(sel) == 1024
    load("FelixConfiguration", {"nodeSelector": sel}, "rack-1")
    [(loc, _)] = errors("FelixConfiguration", {"nodeSelector": sel[:-1] + "x'"}, "rack-1")
    assert loc == "spec.nodeSelector"


# --- WorkloadEndpoint.qosControls ---------------------------------------------------------------


def wep(qos: dict[str, Any]) -> dict[str, Any]:
    return {"interfaceName": "cali1234", "qosControls": qos}


QOS_BOUNDS = [
    ("ingressBandwidth", 1000, 10**15),
    ("egressBandwidth", 1000, 10**15),
    ("ingressBurst", 1000, 34359738360),
    ("egressBurst", 1000, 34359738360),
    ("ingressPeakrate", 1010, 101 * 10**13),
    ("egressPeakrate", 1010, 101 * 10**13),
    ("ingressMinburst", 1000, 10**8),
    ("egressMinburst", 1000, 10**8),
    ("ingressPacketRate", 1, 10**4),
    ("egressPacketRate", 1, 10**4),
    ("ingressPacketBurst", 1, 10**4),
    ("egressPacketBurst", 1, 10**4),
    ("ingressMaxConnections", 1, 4294967295),
    ("egressMaxConnections", 1, 4294967295),
]


@pytest.mark.parametrize(("field", "low", "high"), QOS_BOUNDS)
def test_qos_control_bounds(field: str, low: int, high: int) -> None:
    for ok in (0, low, high):
        assert wire_spec("WorkloadEndpoint", wep({field: ok}))["qosControls"] == {field: ok}
    for bad in (low - 1, high + 1, -1):
        if bad == 0:
            continue
        [(loc, msg)] = errors("WorkloadEndpoint", wep({field: bad}))
        assert loc == f"spec.qosControls.{field}"
        assert msg == f"{bad} is out of range: must be 0 or {low}-{high}"


def test_qos_controls_dscp_and_unknown_field() -> None:
    spec = wire_spec("WorkloadEndpoint", wep({"dscp": "AF41", "ingressBandwidth": 10**6}))
    assert spec["qosControls"] == {"dscp": "AF41", "ingressBandwidth": 10**6}
    [(loc, _)] = errors("WorkloadEndpoint", wep({"ingressBandwith": 10**6}))
    assert loc == "spec.qosControls.ingressBandwith"


# --- Tier status ---------------------------------------------------------------------------------

CONDITION = {
    "type": "Ready",
    "status": "True",
    "lastTransitionTime": "2025-01-02T03:04:05Z",
    "reason": "Ready",
    "message": "",
}


def test_tier_status_conditions_round_trip() -> None:
    res = load("Tier", {"order": 100}, "t1", status={"conditions": [CONDITION]})
    assert res.to_wire()["status"] == {"conditions": [CONDITION]}
    assert "status" not in load("Tier", {"order": 100}, "t1").to_wire()


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("status", "true"),
        ("type", "-Ready"),
        ("type", "x" * 317),
        ("reason", ""),
        ("reason", "1Ready"),
        ("reason", "x" * 1025),
        ("message", "x" * 32769),
        ("lastTransitionTime", "yesterday"),
        ("observedGeneration", -1),
    ],
)
def test_tier_condition_limits(field: str, bad: Any) -> None:
    cond = {**CONDITION, field: bad}
    [(loc, _)] = errors("Tier", {}, "t1", status={"conditions": [cond]})
    assert loc == f"status.conditions.0.{field}"


def test_tier_condition_requires_its_fields() -> None:
    cond = {k: val for k, val in CONDITION.items() if k != "message"}
    [(loc, msg)] = errors("Tier", {}, "t1", status={"conditions": [cond]})
    assert (loc, msg) == ("status.conditions.0.message", "Field required")


# --- QoSPolicy ----------------------------------------------------------------------------------


def test_qos_policy_round_trip_and_scope() -> None:
    spec = {
        "order": 10.0,
        "selector": "app == 'db'",
        "namespaceSelector": "all()",
        "egress": [
            {
                "action": {"dscp": "EF"},
                "ipVersion": 4,
                "protocol": "TCP",
                "destination": {"nets": ["10.0.0.0/8"], "ports": [5432, "8000:8080"]},
            }
        ],
    }
    assert wire_spec("QoSPolicy", spec) == spec
    assert KINDS["QoSPolicy"].plural == "qospolicies" and not KINDS["QoSPolicy"].namespaced


@pytest.mark.parametrize(
    ("spec", "loc", "text"),
    [
        ({"egress": []}, "spec.egress", "at least 1 item"),
        ({}, "spec.egress", "Field required"),
        ({"egress": [{"action": {}}]}, "spec.egress.0.action.dscp", "must set dscp"),
        ({"egress": [{"action": {"dscp": 64}}]}, "spec.egress.0.action.dscp", "DSCP value"),
        (
            {"egress": [{"action": {"dscp": 1}, "destination": {"ports": [80]}}]},
            "spec.egress.0.destination.ports",
            "require protocol",
        ),
        (
            {
                "egress": [
                    {"action": {"dscp": 1}, "ipVersion": 6, "destination": {"nets": ["10.0.0.0/8"]}}
                ]
            },
            "spec.egress.0.destination.nets",
            "doesn't match",
        ),
        ({"selector": "a ==", "egress": [{"action": {"dscp": 1}}]}, "spec.selector", ""),
        ({"egress": [{"action": {"dscp": 1}, "protocol": "tcp"}]}, "spec.egress.0.protocol", ""),
    ],
)
def test_qos_policy_errors(spec: dict[str, Any], loc: str, text: str) -> None:
    found = errors("QoSPolicy", spec)
    assert [where for where, _ in found] == [loc]
    assert text in found[0][1]


# --- DatastoreMigration --------------------------------------------------------------------------


def test_datastore_migration_round_trip() -> None:
    status = {
        "phase": "Migrating",
        "startedAt": "2026-01-01T00:00:00Z",
        "progress": {"total": 10, "migrated": 4, "skipped": 1, "conflicts": 0},
        "conditions": [CONDITION],
    }
    res = load("DatastoreMigration", {"type": "V1ToV3"}, "v1-to-v3", status=status)
    assert res.to_wire()["status"] == status
    assert res.to_wire()["spec"] == {"type": "V1ToV3"}
    assert KINDS["DatastoreMigration"].plural == "datastoremigrations"


@pytest.mark.parametrize(
    ("spec", "status", "loc"),
    [
        ({}, None, "spec.type"),
        ({"type": "V3ToV1"}, None, "spec.type"),
        ({"type": "V1ToV3"}, {"phase": "Done"}, "status.phase"),
        ({"type": "V1ToV3"}, {"progress": {"total": -1}}, "status.progress.total"),
        ({"type": "V1ToV3"}, {"completedAt": "tomorrow"}, "status.completedAt"),
    ],
)
def test_datastore_migration_errors(
    spec: dict[str, Any], status: dict[str, Any] | None, loc: str
) -> None:
    top = {"status": status} if status is not None else {}
    [(where, _)] = errors("DatastoreMigration", spec, "m", **top)
    assert where == loc


def test_new_kinds_load_from_yaml_by_alias() -> None:
    text = (
        "apiVersion: projectcalico.org/v3\nkind: QoSPolicy\nmetadata: {name: q}\n"
        "spec: {egress: [{action: {dscp: CS1}}]}\n---\n"
        "apiVersion: projectcalico.org/v3\nkind: DatastoreMigration\nmetadata: {name: m}\n"
        "spec: {type: V1ToV3}\n"
    )
    kinds = [r.KIND for r in load_documents(text, source="t.yaml")]
    assert kinds == ["QoSPolicy", "DatastoreMigration"]


# --- (Global)NetworkSet limits ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["NetworkSet", "GlobalNetworkSet"])
def test_network_set_limits(kind: str) -> None:
    longest = "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255/128"  # 49 characters
    assert len(longest) == 49
    load(kind, {"nets": [longest]})
    [(loc, _)] = errors(kind, {"nets": ["0" + longest]})
    assert loc == "spec.nets.0"
    many = [f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}" for i in range(100001)]
    load(kind, {"nets": many[:100000]})
    [(loc, _)] = errors(kind, {"nets": many})
    assert loc == "spec.nets"


def test_ipam_block_alternate_owner_wire_name() -> None:
    attr = {"handle_id": "k8s-pod-network.abc", "alternateOwnerAttrs": {"pod": "vm-target"}}
    spec = {
        "cidr": "10.0.0.0/30",
        "allocations": [0, None, None, None],
        "unallocated": [1, 2, 3],
        "attributes": [attr],
    }
    stored = wire_spec("IPAMBlock", spec, "10-0-0-0-30")
    assert stored["attributes"] == [attr]
    # The earlier spelling (also the attribute's Python name) is still read, written anew.
    legacy = {**spec, "attributes": [{"alternate": {"pod": "vm-source"}}]}
    assert wire_spec("IPAMBlock", legacy, "10-0-0-0-30")["attributes"] == [
        {"alternateOwnerAttrs": {"pod": "vm-source"}}
    ]
    [(loc, _)] = errors("IPAMBlock", {**spec, "attributes": [{"alternateOwner": {}}]}, "b")
    assert loc == "spec.attributes.0.alternateOwner"


# --- KubeControllersConfiguration host endpoint templates ---------------------------------------


def kcc(template: dict[str, Any]) -> dict[str, Any]:
    return {"controllers": {"node": {"hostEndpoint": {"templates": [template]}}}}


@pytest.mark.parametrize(
    ("template", "field"),
    [
        ({"interfacePattern": "eth[0-"}, "interfacePattern"),
        ({"generateName": "Bad_Name"}, "generateName"),
        ({"labels": {"bad key!": "x"}}, "labels"),
        ({"interfaceCIDRs": ["10.0.0.0/33"]}, "interfaceCIDRs.0"),
    ],
)
def test_auto_host_endpoint_template_validation(template: dict[str, Any], field: str) -> None:
    [(loc, _)] = errors("KubeControllersConfiguration", kcc(template), "default")
    assert loc == f"spec.controllers.node.hostEndpoint.templates.0.{field}"


def test_auto_host_endpoint_template_accepts_upstream_example() -> None:
    template = {
        "generateName": "custom-host-endpoint",
        "interfaceCIDRs": ["1.2.3.0/24"],
        "interfacePattern": "eth[0-9]+",
        "labels": {"env": "prod"},
        "nodeSelector": "has(my-label)",
    }
    spec = wire_spec("KubeControllersConfiguration", kcc(template), "default")
    assert spec["controllers"]["node"]["hostEndpoint"]["templates"] == [template]


def test_example_manifest_loads_and_round_trips() -> None:
    path = Path(__file__).parent / "manifests" / "upstream-fields.yaml"
    resources = load_file(path)
    assert [r.KIND for r in resources] == [
        "BGPConfiguration",
        "BGPFilter",
        "FelixConfiguration",
        "WorkloadEndpoint",
        "QoSPolicy",
        "DatastoreMigration",
    ]
    again = load_documents(dump_resources(resources), source="dump.yaml")
    assert [r.to_wire() for r in again] == [r.to_wire() for r in resources]


def test_ippool_status_conditions() -> None:
    cond = {**CONDITION, "type": "Allocatable", "reason": "PoolDisabled", "status": "False"}
    res = load("IPPool", {"cidr": "10.0.0.0/16"}, "p", status={"conditions": [cond]})
    assert res.to_wire()["status"] == {"conditions": [cond]}
    assert "status" not in load("IPPool", {"cidr": "10.0.0.0/16"}, "p").to_wire()
    [(loc, _)] = errors(
        "IPPool", {"cidr": "10.0.0.0/16"}, "p", status={"conditions": [{**cond, "status": "no"}]}
    )
    assert loc == "status.conditions.0.status"


def test_new_felix_fields_reach_felix_as_v1_parameters() -> None:
    spec = FelixConfigurationSpec.model_validate(
        {**NEW_FELIX, "liveMigrationRouteConvergenceTime": "1m", "istioDSCPMark": "EF"}
    )
    assert spec_params(spec) == {
        "BPFIPFragTimeout": "30",
        "BPFIPFragmentReassemblyEnabled": "false",
        "BPFOverlayHostSourceIP": "HostAddress",
        "IstioAmbientMode": "Enabled",
        "IstioDSCPMark": "EF",
        "LiveMigrationRouteConvergenceTime": "60",
        "LocalSubnetL2Reachability": "PodsAndLoadBalancers",
        "LocalSubnetL2ReachabilityRefreshInterval": "120",
        "ProgramClusterRoutes": "EnabledIPIPOnly",
    }
