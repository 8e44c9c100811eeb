"""Representative cases of upstream calicoctl's system tests (calicoctl/tests/st/calicoctl), on
the embedded datastore and on a real etcd (the ``ctl`` fixture runs every test on both).

Each test names the upstream behaviour it pins: output as the Go structs print it, decoding as
the Go loader does, upstream's error texts, validation rules and multi-document semantics.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from ctl_helpers import Ctl, Run, set_cluster_version

A = "projectcalico.org/v3"
SERVER_SET = ("creationTimestamp", "resourceVersion", "uid")

POOL = {
    "apiVersion": A,
    "kind": "IPPool",
    "metadata": {"name": "ippool-name1"},
    "spec": {
        "cidr": "10.0.1.0/24",
        "ipipMode": "Always",
        "vxlanMode": "Never",
        "blockSize": 27,
        "allowedUses": ["Workload", "Tunnel"],
        "nodeSelector": "foo == 'bar'",
        "assignmentMode": "Automatic",
    },
}
PEER_INVALID = {
    "apiVersion": A,
    "kind": "BGPPeer",
    "metadata": {"name": "bgppeer-name-123abc"},
    "spec": {"node": "node2", "peerIP": "badpeerIP", "asNumber": 64515},
}
PEER = {
    "apiVersion": A,
    "kind": "BGPPeer",
    "metadata": {"name": "bgppeer-ok"},
    "spec": {"node": "node1", "peerIP": "192.168.0.250", "asNumber": 64514},
}
NP = {
    "apiVersion": A,
    "kind": "NetworkPolicy",
    "metadata": {"name": "policy-mypolicy1", "namespace": "default"},
    "spec": {
        "order": 100,
        "selector": "type=='database'",
        "types": ["Ingress", "Egress"],
        "egress": [{"action": "Allow", "source": {"selector": "type=='application'"}}],
        "ingress": [
            {
                "action": "Deny",
                "protocol": "TCP",
                "source": {"ports": [1234, "10:1024"], "nets": ["10.0.0.0/16"]},
            }
        ],
    },
}


def dump(data: Any, fmt: str = "yaml") -> str:
    return json.dumps(data) if fmt == "json" else yaml.safe_dump(data)


def write(ctl: Ctl, verb: str, data: Any, fmt: str = "yaml") -> Run:
    return ctl(verb, "-f", "-", stdin=dump(data, fmt))


def clean(data: Any) -> Any:
    """Upstream's ``clean_calico_data``: drop server-set fields, nulls and empty maps."""
    if isinstance(data, list):
        return [clean(v) for v in data]
    if isinstance(data, dict):
        out = {k: clean(v) for k, v in data.items() if k not in SERVER_SET}
        return {k: v for k, v in out.items() if v is not None and v != {}}
    return data


def get(ctl: Ctl, *args: str, fmt: str = "yaml") -> Any:
    r = ctl("get", *args, "-o", fmt)
    assert r.code == 0, r
    return json.loads(r.out) if fmt == "json" else yaml.safe_load(r.out)


def with_tier_label(policy: dict[str, Any], tier: str = "default") -> dict[str, Any]:
    out = copy.deepcopy(policy)
    out["metadata"].setdefault("labels", {})["projectcalico.org/tier"] = tier
    out["spec"].setdefault("tier", tier)
    return out


# --- output as upstream's Go structs print it


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_get_round_trips_the_manifest(ctl: Ctl, fmt: str) -> None:
    assert write(ctl, "create", POOL, fmt).code == 0
    got = get(ctl, "ippool", "ippool-name1", fmt=fmt)
    assert clean(got) == POOL  # natOutgoing/disabled/disableBGPExport false: not printed
    listed = get(ctl, "ippool", fmt=fmt)
    assert clean(listed["items"]) == [POOL]


def test_pointer_fields_print_when_false(ctl: Ctl) -> None:
    """omitempty drops a false bool, not a set-to-false optional (a pointer in Go)."""
    fc = {
        "apiVersion": A,
        "kind": "FelixConfiguration",
        "metadata": {"name": "felixconfiguration1"},
        "spec": {"ipv6Support": False, "logSeverityScreen": "Debug", "netlinkTimeout": "125s"},
    }
    assert write(ctl, "create", fc).code == 0
    spec = get(ctl, "felixconfig", "felixconfiguration1")["spec"]
    assert spec == {"ipv6Support": False, "logSeverityScreen": "Debug", "netlinkTimeout": "2m5s"}


def test_policies_carry_the_tier_label(ctl: Ctl) -> None:
    gnp = {**copy.deepcopy(NP), "kind": "GlobalNetworkPolicy", "metadata": {"name": "gnp1"}}
    assert write(ctl, "create", [NP, gnp]).code == 0
    assert clean(get(ctl, "networkpolicy", "policy-mypolicy1")) == with_tier_label(NP)
    assert clean(get(ctl, "globalnetworkpolicy", "gnp1")) == with_tier_label(gnp)
    # apply keeps it even when the input's labels do not carry it
    changed = copy.deepcopy(NP)
    changed["metadata"]["labels"] = {"a": "b"}
    assert write(ctl, "apply", changed).code == 0
    labels = get(ctl, "networkpolicy", "policy-mypolicy1")["metadata"]["labels"]
    assert labels == {"a": "b", "projectcalico.org/tier": "default"}
    # as upstream's client re-adds it on every update, patch and label cannot drop it
    patch = '{"metadata": {"labels": null}}'
    assert ctl("patch", "gnp", "gnp1", "-t", "merge", "-p", patch).code == 0
    assert get(ctl, "gnp", "gnp1")["metadata"]["labels"] == {"projectcalico.org/tier": "default"}
    r = ctl("label", "gnp", "gnp1", "projectcalico.org/tier", "--remove")
    assert r.code == 0, r
    assert get(ctl, "gnp", "gnp1")["metadata"]["labels"] == {"projectcalico.org/tier": "default"}


def test_export_prints_a_null_creation_timestamp_and_applies_back(ctl: Ctl) -> None:
    assert write(ctl, "create", NP).code == 0
    r = ctl("get", "networkpolicy", "policy-mypolicy1", "-o", "yaml", "--export")
    exported = yaml.safe_load(r.out)
    assert exported["metadata"] == {
        "creationTimestamp": None,
        "name": "policy-mypolicy1",
        "labels": {"projectcalico.org/tier": "default"},
    }
    exported["spec"]["order"] = 100
    assert write(ctl, "apply", exported).code == 0
    assert get(ctl, "networkpolicy", "policy-mypolicy1")["spec"]["order"] == 100


# --- decoding as upstream's loader does


def test_field_names_match_case_insensitively(ctl: Ctl) -> None:
    tier = {"apiVersion": A, "kind": "Tier", "metadata": {"name": "t1"}, "spec": {"Order": 10}}
    assert write(ctl, "create", tier).code == 0
    assert get(ctl, "tier", "t1")["spec"] == {"order": 10}
    np = copy.deepcopy(NP)
    np["spec"]["Egress"] = np["spec"].pop("egress")
    np["spec"]["INGRESS"] = np["spec"].pop("ingress")
    np["Metadata"] = np.pop("metadata")
    assert write(ctl, "create", np).code == 0
    assert clean(get(ctl, "networkpolicy", "policy-mypolicy1")) == with_tier_label(NP)


def test_object_meta_fields_are_accepted_and_server_owned(ctl: Ctl) -> None:
    meta = {
        "name": "policy-mypolicy2",
        "namespace": "default",
        "generateName": "test-policy-",
        "deletionTimestamp": "2006-01-02T15:04:07Z",
        "deletionGracePeriodSeconds": 30,
        "ownerReferences": [{"apiVersion": "v1", "kind": "DaemonSet", "name": "x", "uid": "u"}],
        "clusterName": "cluster1",
        "labels": {"label1": "l1"},
        "annotations": {"key": "value"},
        "selfLink": "test-self-link",
        "uid": "test-uid-change",
        "generation": 3,
        "finalizers": ["finalizer1"],
        "creationTimestamp": "2006-01-02T15:04:05Z",
        "managedFields": [{"manager": "kubectl"}],
    }
    doc = {**copy.deepcopy(NP), "metadata": meta}
    for verb in ("create", "apply"):
        r = write(ctl, verb, doc)
        assert r.code == 0, r
        got = get(ctl, "networkpolicy", "policy-mypolicy2")["metadata"]
        assert set(got) == {*SERVER_SET, "name", "namespace", "labels", "annotations"}
        assert got["uid"] != "test-uid-change"
        assert got["creationTimestamp"] != "2006-01-02T15:04:05Z"
        assert got["labels"] == {"label1": "l1", "projectcalico.org/tier": "default"}


@pytest.mark.parametrize("namespace", ["", None])
def test_missing_or_empty_namespace_is_default(ctl: Ctl, namespace: str | None) -> None:
    doc = copy.deepcopy(NP)
    if namespace is None:
        del doc["metadata"]["namespace"]
    else:
        doc["metadata"]["namespace"] = namespace
    assert write(ctl, "create", doc).code == 0
    assert get(ctl, "networkpolicy", "policy-mypolicy1", "-n", "default")["metadata"][
        "namespace"
    ] == ("default")
    assert write(ctl, "delete", doc).code == 0


def test_yaml_scalars_for_string_fields_stay_strings(ctl: Ctl) -> None:
    text = (
        "apiVersion: projectcalico.org/v3\nkind: HostEndpoint\nmetadata:\n  name: h1\n"
        "  labels: {route-reflector: yes, on-flag: on, t: true, n: 5663, f: false}\n"
        "spec:\n  node: n1\n  expectedIPs: [1.2.3.4]\n---\n"
        "apiVersion: projectcalico.org/v3\nkind: BGPConfiguration\nmetadata:\n  name: default\n"
        "spec:\n  communities:\n  - name: c1\n    value: 5663:12\n---\n"
        "apiVersion: projectcalico.org/v3\nkind: Tier\nmetadata:\n  name: bare\nspec:\n"
    )
    r = ctl("create", "-f", "-", stdin=text)
    assert r.code == 0, r
    labels = get(ctl, "hostendpoint", "h1")["metadata"]["labels"]
    assert labels == {"route-reflector": "true", "on-flag": "true", "t": "true", "n": "5663"} | {
        "f": "false"
    }
    assert get(ctl, "bgpconfig", "default")["spec"]["communities"] == [
        {"name": "c1", "value": "5663:12"}
    ]
    assert get(ctl, "tier", "bare")["spec"] == {}
    r = ctl("get", "hostendpoint", "-o", "wide")
    assert r.code == 0


# --- upstream's error texts


def test_invalid_resource_messages(ctl: Ctl) -> None:
    second = {**copy.deepcopy(PEER_INVALID), "metadata": {"name": "bgppeer-invalid2"}}
    reason = (
        "error with field PeerIP = 'badpeerIP' ('badpeerIP' must be an IP address, optionally "
        "with a port as <IPv4>:<port> or [<IPv6>]:<port>)"
    )
    for verb in ("create", "apply"):
        r = write(ctl, verb, PEER_INVALID, "json")
        assert (r.code, r.out) == (1, ""), r
        assert r.err == f"failed to {verb} 'BGPPeer' resource: [{reason}]\n"
        r = write(ctl, verb, [PEER_INVALID, second])
        assert (r.code, r.out) == (1, "")
        assert r.err == f"failed to {verb} any 'BGPPeer' resources: [{reason}]\n"
    assert get(ctl, "bgppeer")["items"] == []


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"cidr": "10.0.250.0/32"},
            "error with field IPPool.Spec.CIDR = '10.0.250.0/32' (IP pool size is too small for "
            "use with Calico IPAM. It must be equal to or greater than the block size.)",
        ),
        (
            {"cidr": "::/128", "ipipMode": "Never", "vxlanMode": "Never"},
            "error with field IPPool.Spec.CIDR = '::/128' (IP pool size is too small",
        ),
        ({"cidr": "10.0.1.0/33"}, "error with field IPPool.Spec.CIDR = '10.0.1.0/33' ("),
    ],
)
def test_pool_validation_messages(ctl: Ctl, spec: dict[str, Any], message: str) -> None:
    doc = {"apiVersion": A, "kind": "IPPool", "metadata": {"name": "p1"}, "spec": spec}
    r = write(ctl, "create", doc)
    assert r.code == 1
    assert r.err.startswith(f"failed to create 'IPPool' resource: [{message}"), r


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            {**PEER, "apiVersion": "v7"},
            "failed to execute command: <stdin>, document 1: unknown resource type (BGPPeer) "
            "and/or version (v7)",
        ),
        (
            {**PEER, "spec": {**PEER["spec"], "asNumber": 4294967296}},
            "failed to execute command: <stdin>, document 1, BGPPeer(bgppeer-ok): cannot "
            "unmarshal number into Go struct field BGPPeerSpec.spec.asNumber of type string",
        ),
        (
            {**PEER, "spec": {**PEER["spec"], "unknown": "thing"}},
            "failed to execute command: <stdin>, document 1, BGPPeer(bgppeer-ok): field in "
            "document is not recognized or is in the wrong location: unknown",
        ),
        (
            {**POOL, "spec": {"cidr": "10.0.1.0/24", "disabled": "True"}},
            "failed to execute command: <stdin>, document 1, IPPool(ippool-name1): cannot parse "
            "string 'True' into field IPPoolSpec.disabled of type bool",
        ),
        (
            {
                **NP,
                "spec": {"egress": [{"action": "Deny", "source": {"ports": [10, 90, 65536]}}]},
            },
            "failed to execute command: <stdin>, document 1, NetworkPolicy(policy-mypolicy1): "
            "cannot unmarshal number 65536 into Go value of type uint16",
        ),
        (
            {**NP, "spec": {"egress": [{"action": "Deny", "source": {"ports": ["1:65536"]}}]}},
            "failed to execute command: <stdin>, document 1, NetworkPolicy(policy-mypolicy1): "
            "invalid maximum port number in range (1:65536)",
        ),
        (
            {**NP, "spec": {"egress": [{"action": "Deny", "source": {"ports": ["65535:1"]}}]}},
            "failed to execute command: <stdin>, document 1, NetworkPolicy(policy-mypolicy1): "
            "minimum port number (65535) is greater than maximum port number (1) in port range",
        ),
    ],
)
def test_decode_errors_name_the_document(ctl: Ctl, doc: dict[str, Any], message: str) -> None:
    for verb in ("create", "apply", "replace", "validate"):
        r = write(ctl, verb, doc)
        assert (r.code, r.out, r.err) == (1, "", message + "\n"), r


def test_not_found_and_multi_name_get(ctl: Ctl) -> None:
    pool2 = {
        **copy.deepcopy(POOL),
        "metadata": {"name": "ippool-name2"},
        "spec": {"cidr": "fed0:8001::/64", "blockSize": 123, "nodeSelector": "all()"},
    }
    assert write(ctl, "create", [POOL, pool2]).code == 0
    table1 = (
        "NAME           CIDR          SELECTOR       \nippool-name1   10.0.1.0/24   foo == 'bar'"
    )
    table2 = "NAME           CIDR             SELECTOR   \nippool-name2   fed0:8001::/64   all()"
    both = ctl("get", "ippool", "ippool-name1", "ippool-name2")
    assert both.out == table1 + "   \n\n" + table2 + "      \n\n"
    r = ctl("get", "ippool", "ippool-name1", "blah", "ippool-name2")
    assert (r.code, r.out) == (1, both.out)
    assert r.err == "resource does not exist: IPPool(blah) with error: <nil>\n"
    r = ctl("delete", "ippool", "blah")
    assert r.err == (
        "Failed to delete 'IPPool' resource: resource does not exist: IPPool(blah) "
        "with error: <nil>\n"
    )


def test_validate_messages(ctl: Ctl) -> None:
    bad = {**copy.deepcopy(POOL), "metadata": {"name": "Bad_Name"}}
    r = write(ctl, "validate", [POOL, bad])
    assert r.code == 1
    assert r.out == "Partial success: validated the first 1 out of 2 'IPPool' resources:\n"
    assert r.err.startswith("hit error(s): [error with field Name = 'Bad_Name' (")
    r = write(ctl, "validate", bad)
    assert r.err.startswith("failed to validate 'IPPool' resource: [error with field Name")
    r = write(ctl, "validate", [bad, PEER_INVALID])
    assert r.err.startswith("failed to validate any resources: [error with field Name")
    r = ctl("validate", "-f", "-", stdin="")
    assert (r.code, r.err) == (1, "no resources specified in file -\n")
    assert (write(ctl, "validate", [POOL, PEER]).out) == "Successfully validated 2 resource(s)\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-m"], "unknown shorthand flag: 'm' in -m\n"),
        (["get", "ippool", "-m"], "unknown shorthand flag: 'm' in -m\n"),
        (["--unknown-flag"], "unknown flag: --unknown-flag\n"),
        (["ipam", "show", "--bogus"], "unknown flag: --bogus\n"),
    ],
)
def test_unknown_flags_in_cobra_words(ctl: Ctl, args: list[str], message: str) -> None:
    r = ctl(*args)
    assert (r.code, r.out, r.err) == (1, "", message)


def test_version_mismatch(ctl: Ctl, ds_env: dict[str, str]) -> None:
    assert write(ctl, "create", POOL).code == 0
    set_cluster_version(ds_env, "v0.0.0.1.2.3")
    r = write(ctl, "replace", POOL)
    assert r.code == 1 and r.err.startswith("Version mismatch.\nClient Version:   ")
    assert write(ctl, "replace", POOL).code == 1
    assert ctl("--allow-version-mismatch", "replace", "-f", "-", stdin=dump(POOL)).code == 0


# --- validation as upstream


def test_bgppeer_node_must_be_a_node_name(ctl: Ctl) -> None:
    doc = {**PEER, "spec": {"asNumber": 64590, "node": "node 2", "peerIP": "fd5f::6:ee"}}
    r = write(ctl, "create", doc)
    assert r.err.startswith(
        "failed to create 'BGPPeer' resource: [error with field Node = 'node 2'"
    )


def test_non_default_bgp_configuration_may_not_set_default_only_fields(ctl: Ctl) -> None:
    doc = {
        "apiVersion": A,
        "kind": "BGPConfiguration",
        "metadata": {"name": "bgpconfiguration1"},
        "spec": {"logSeverityScreen": "Info"},
    }
    assert write(ctl, "create", doc).code == 0
    doc["spec"] = {"logSeverityScreen": "Debug", "nodeToNodeMeshEnabled": True}
    r = write(ctl, "apply", doc)
    assert r.code == 1
    assert r.err == (
        "failed to apply 'BGPConfiguration' resource: [error with field NodeToNodeMeshEnabled = "
        "'true' (Cannot set nodeToNodeMeshEnabled on a non default BGP Configuration.)]\n"
    )
    doc["metadata"]["name"] = "default"
    assert write(ctl, "apply", doc).code == 0


def test_kubernetes_policy_names_are_refused(ctl: Ctl) -> None:
    knp = copy.deepcopy(NP)
    knp["metadata"]["name"] = "knp.default.foobarfizz"
    reason = "kubernetes network policies must be managed through the kubernetes API"
    r = write(ctl, "create", knp)
    assert r.err == (
        "failed to create 'NetworkPolicy' resource: [operation create or apply is not supported "
        f"on NetworkPolicy(default/knp.default.foobarfizz): {reason}]\n"
    )
    for verb in ("apply", "replace"):  # upstream's update reads the resource first
        assert "resource does not exist: NetworkPolicy(default/knp" in write(ctl, verb, knp).err
    r = write(ctl, "delete", knp)
    assert "operation delete is not supported on NetworkPolicy(default/knp" in r.err
    assert reason in r.err


def test_cluster_information_is_not_the_users(ctl: Ctl) -> None:
    ci = {
        "apiVersion": A,
        "kind": "ClusterInformation",
        "metadata": {"name": "default"},
        "spec": {"clusterGUID": "cluster-guid2", "calicoVersion": "calico-version2"},
    }
    r = write(ctl, "create", ci)
    assert r.err == (
        "failed to create 'ClusterInformation' resource: [operation create or apply is not "
        "supported on ClusterInformation]\n"
    )
    r = write(ctl, "apply", ci)
    assert "operation apply is not supported on ClusterInformation: resource is readonly" in r.err
    r = write(ctl, "replace", ci)
    assert r.err == (
        "failed to replace 'ClusterInformation' resource: operation apply or replace is not "
        "supported on ClusterInformation\n"
    )
    r = ctl("delete", "clusterinfo", "default")
    assert "operation delete is not supported on ClusterInformation" in r.err
    assert get(ctl, "clusterinfo", "default")["spec"]["clusterGUID"] != "cluster-guid2"


def test_felix_configuration_with_any_name(ctl: Ctl) -> None:
    doc = {
        "apiVersion": A,
        "kind": "FelixConfiguration",
        "metadata": {"name": "felixconfiguration1"},
        "spec": {"logSeverityScreen": "Info"},
    }
    for verb in ("create", "replace", "apply"):
        assert write(ctl, verb, doc).code == 0
    assert ctl("delete", "felixconfig", "felixconfiguration1").code == 0


def test_default_allow_profile_is_listed(ctl: Ctl) -> None:
    r = ctl("get", "profiles", "-o", "yaml")
    assert r.code == 0
    assert r.out.startswith(
        "apiVersion: projectcalico.org/v3\n"
        "items:\n"
        "- apiVersion: projectcalico.org/v3\n"
        "  kind: Profile\n"
        "  metadata:\n"
        "    creationTimestamp: null\n"
        "    name: projectcalico-default-allow\n"
        '    resourceVersion: "1"\n'
        "  spec:\n"
        "    egress:\n"
        "    - action: Allow\n"
        "      destination: {}\n"
        "      source: {}\n"
        "    ingress:\n"
        "    - action: Allow\n"
        "      destination: {}\n"
        "      source: {}\n"
        "kind: ProfileList\n"
    ), r
    one = get(ctl, "profile", "projectcalico-default-allow")
    assert one["metadata"] == {
        "creationTimestamp": None,
        "name": "projectcalico-default-allow",
        "resourceVersion": "1",
    }
    assert "projectcalico-default-allow" in ctl("get", "profiles").out


# --- multi-document writes (documents in order, stop at the first failure)


def test_partial_success_names_the_documents_written(ctl: Ctl) -> None:
    docs = [PEER, PEER_INVALID, {**PEER, "metadata": {"name": "bgppeer-third"}}]
    r = write(ctl, "create", docs)
    assert r.code == 1
    assert r.out == "Partial success: created the first 1 out of 3 'BGPPeer' resources:\n"
    assert r.err.startswith("hit error: [error with field PeerIP = 'badpeerIP'")
    assert [p["metadata"]["name"] for p in get(ctl, "bgppeer")["items"]] == ["bgppeer-ok"]


def test_compound_kinds_partial_success(ctl: Ctl) -> None:
    profile = {
        "apiVersion": A,
        "kind": "Profile",
        "metadata": {"name": "profile2"},
        "spec": {
            "Ingress": [
                {"ipVersion": 4, "ICMP": {"type": 256, "code": 255}, "action": "Deny"},
            ]
        },
    }
    r = write(ctl, "create", [PEER, profile])
    assert r.code == 1
    assert r.out == "Partial success: created the first 1 out of 2 resources:\n"
    assert r.err.startswith("hit error: [error with field Type = '256'")
    assert [p["metadata"]["name"] for p in get(ctl, "profiles")["items"]] == [
        "projectcalico-default-allow"
    ]


def test_undecodable_document_writes_nothing(ctl: Ctl) -> None:
    bad = {**PEER, "metadata": {"name": "bgppeer-2"}, "spec": {"asNumber": "x", "node": []}}
    r = write(ctl, "apply", [PEER, bad])
    assert (r.code, r.out) == (1, "")
    assert r.err.startswith("failed to execute command: <stdin>, document 1, item 2, BGPPeer(")
    assert get(ctl, "bgppeer")["items"] == []
