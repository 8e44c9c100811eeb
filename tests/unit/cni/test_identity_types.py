"""Names derived from a workload, and result shapes per CNI version."""

from __future__ import annotations

import hashlib

from calico.cni.identity import CNI, K8S, Identity, host_veth_name, veth_prefix
from calico.cni.types import Interface, IPConfig, Result, Route, version_result


def ident(orch: str, ns: str, workload: str, cid: str = "abcdef0123456789") -> Identity:
    return Identity(orch, ns, workload, cid, "eth0", "node-1", "k8s-pod-network")


def test_k8s_names() -> None:
    i = ident(K8S, "kube-system", "coredns-abc")
    assert i.wep_name == "node--1-k8s-coredns--abc-eth0"
    assert i.workload_id == "kube-system/coredns-abc"
    assert i.handle_id == "k8s-pod-network.abcdef0123456789"
    assert i.workload_handle_id == "kube-system.coredns-abc"
    digest = hashlib.sha1(b"kube-system.coredns-abc").hexdigest()
    assert host_veth_name(i) == "cali" + digest[:11]
    assert host_veth_name(i, "tap") == "tap" + digest[:11]


def test_cni_names() -> None:
    i = ident(CNI, "default", "abcdef0123456789")
    assert i.wep_name == "node--1-cni-abcdef0123456789-eth0"
    assert host_veth_name(i) == "caliabcdef01234"
    assert len(host_veth_name(i)) == 15


def test_veth_prefix_from_felix_env() -> None:
    assert veth_prefix({}) == "cali"
    assert veth_prefix({"FELIX_INTERFACEPREFIX": "tap,cali"}) == "tap"


def sample() -> Result:
    return Result(
        interfaces=[Interface("cali1", "ee:ee:ee:ee:ee:ee"), Interface("eth0", "02:00", "/ns")],
        ips=[IPConfig("10.0.0.1/32", "169.254.1.1", 1), IPConfig("fd00::1/128", "fe80::1", 1)],
        routes=[Route("0.0.0.0/0", "169.254.1.1")],
    )


def test_result_1_0_0() -> None:
    doc = sample().to_dict("1.0.0")
    assert doc["cniVersion"] == "1.0.0"
    assert doc["ips"][0] == {"interface": 1, "address": "10.0.0.1/32", "gateway": "169.254.1.1"}
    assert doc["interfaces"][1] == {"name": "eth0", "mac": "02:00", "sandbox": "/ns"}
    assert doc["routes"] == [{"dst": "0.0.0.0/0", "gw": "169.254.1.1"}]
    assert doc["dns"] == {}


def test_result_legacy_versions_carry_ip_version() -> None:
    for version in ("0.3.0", "0.3.1", "0.4.0"):
        ips = sample().to_dict(version)["ips"]
        assert [ip["version"] for ip in ips] == ["4", "6"]


def test_result_round_trip() -> None:
    doc = sample().to_dict("0.4.0")
    again = Result.from_dict(doc).to_dict("0.4.0")
    assert again == doc


def test_version_result() -> None:
    assert version_result("0.4.0")["cniVersion"] == "0.4.0"
    assert version_result("9.9.9")["cniVersion"] == "1.0.0"
    assert version_result("")["supportedVersions"] == ["0.3.0", "0.3.1", "0.4.0", "1.0.0"]
