"""host-local IPAM with ``subnet: usePodCidr`` in Kubernetes mode (``calico.cni.pod_cidr``):
the node's podCIDR read from the (fake) API server, then the real host-local binary
(containernetworking-plugins) allocates from it and releases on DEL."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from k8s_fake_apiserver import FakeAPIServer

from calico.cni import plugin
from calico.cni.errors import INVALID_NETCONF, IPAM_FAILURE, CNIError
from calico.cni.pod_cidr import needs_pod_cidr, replace_pod_cidrs
from calico.cni.store import Store
from calico.datastore.config import DatastoreConfig
from calico.datastore.kubernetes import KubernetesBackend

HOST_LOCAL_DIR = "/usr/lib/cni"
NODE = {"metadata": {"name": "n1"}, "spec": {"podCIDRs": ["10.244.3.0/24", "fd00:3::/64"]}}


@pytest.mark.parametrize(
    ("ipam", "want"),
    [
        ({"type": "host-local", "subnet": "usePodCidr"}, {"subnet": "10.244.3.0/24"}),
        (
            {
                "type": "host-local",
                "ranges": [[{"subnet": "usePodCidr"}], [{"subnet": "usePodCidrIPv6"}]],
            },
            {"ranges": [[{"subnet": "10.244.3.0/24"}], [{"subnet": "fd00:3::/64"}]]},
        ),
        (
            {"type": "host-local", "ranges": [[{"subnet": "10.9.0.0/16"}]]},
            None,  # nothing magic: untouched
        ),
        ({"type": "calico-ipam", "subnet": "usePodCidr"}, None),
    ],
)
def test_magic_subnets_are_replaced(ipam: dict[str, Any], want: dict[str, Any] | None) -> None:
    doc = {"cniVersion": "1.0.0", "name": "k8s", "type": "calico", "ipam": ipam}
    assert needs_pod_cidr(doc) is (want is not None)
    if want is not None:
        out = json.loads(replace_pod_cidrs(json.dumps(doc).encode(), NODE))
        assert out["ipam"] == {"type": "host-local", **want}


def test_single_pod_cidr_field_and_missing_family() -> None:
    old = {"metadata": {"name": "n2"}, "spec": {"podCIDR": "10.1.2.0/24"}}
    doc = {"ipam": {"type": "host-local", "subnet": "usePodCidr"}}
    assert json.loads(replace_pod_cidrs(json.dumps(doc).encode(), old))["ipam"]["subnet"] == (
        "10.1.2.0/24"
    )
    doc6 = {"ipam": {"type": "host-local", "subnet": "usePodCidrIPv6"}}
    with pytest.raises(CNIError, match="failed to get pod CIDR of node n2") as info:
        replace_pod_cidrs(json.dumps(doc6).encode(), old)
    assert "no IPv6 podCIDR" in info.value.details


@pytest.fixture
def api() -> Iterator[FakeAPIServer]:
    with FakeAPIServer() as server:
        yield server


def _call(
    tmp_path: Path, command: str, subnet: str, features: dict[str, bool] | None = None
) -> plugin.Call:
    conf: dict[str, Any] = {
        "cniVersion": "1.0.0",
        "name": "k8s-pod-network",
        "type": "calico",
        "nodename": "n1",
        "datastore_type": "kubernetes",
        "ipam": {"type": "host-local", "subnet": subnet, "dataDir": str(tmp_path / "hl")},
    }
    if features is not None:
        conf["feature_control"] = features
    environ = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": "c0ffee",
        "CNI_NETNS": "/var/run/netns/none",
        "CNI_IFNAME": "eth0",
        "CNI_PATH": HOST_LOCAL_DIR,
        "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=x;K8S_POD_NAME=a",
        "PATH": os.environ.get("PATH", ""),
    }
    return plugin.prepare(json.dumps(conf).encode(), environ)


@pytest.mark.skipif(
    not os.access(f"{HOST_LOCAL_DIR}/host-local", os.X_OK), reason="host-local not installed"
)
def _pod(api: FakeAPIServer, annotations: dict[str, str] | None = None) -> None:
    api.put_object("v1", "namespaces", {"metadata": {"name": "x"}})
    meta: dict[str, Any] = {"name": "a", "namespace": "x", "annotations": annotations or {}}
    api.put_object("v1", "pods", {"metadata": meta, "spec": {"nodeName": "n1"}})


def _held(tmp_path: Path) -> list[str]:
    net = tmp_path / "hl" / "k8s-pod-network"
    return sorted(p.name for p in net.iterdir()) if net.exists() else []


def test_host_local_allocates_from_the_nodes_pod_cidr(api: FakeAPIServer, tmp_path: Path) -> None:
    api.put_object(
        "v1", "nodes", {"metadata": {"name": "n1"}, "spec": {"podCIDR": "10.244.7.0/24"}}
    )
    _pod(api)
    store = Store(
        KubernetesBackend(DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": api.url}))
    )
    try:
        result = plugin.ipam_add(_call(tmp_path, "ADD", "usePodCidr"), store)
        addr = result.ips[0].address
        assert addr.startswith("10.244.7.") and addr.endswith("/24"), addr
        held = [p.name for p in (tmp_path / "hl" / "k8s-pod-network").iterdir()]
        assert addr.split("/")[0] in held
        plugin.ipam_del(_call(tmp_path, "DEL", "usePodCidr"), store)
        held = [p.name for p in (tmp_path / "hl" / "k8s-pod-network").iterdir()]
        assert addr.split("/")[0] not in held
        api.put_object("v1", "nodes", {"metadata": {"name": "n9"}, "spec": {}})
        call = _call(tmp_path, "ADD", "usePodCidr")
        for node, words in (
            ("n9", "failed to get pod CIDR of node n9"),
            ("gone", "failed to get node gone"),
        ):
            other = dataclasses.replace(call, ident=dataclasses.replace(call.ident, node=node))
            with pytest.raises(CNIError, match=words) as info:
                plugin.ipam_add(other, store)
            assert info.value.code == IPAM_FAILURE
    finally:
        store.close()


@pytest.mark.skipif(
    not os.access(f"{HOST_LOCAL_DIR}/host-local", os.X_OK), reason="host-local not installed"
)
def test_host_local_checks_the_floating_ips_feature(api: FakeAPIServer, tmp_path: Path) -> None:
    api.put_object(
        "v1", "nodes", {"metadata": {"name": "n1"}, "spec": {"podCIDR": "10.244.7.0/24"}}
    )
    _pod(api, {"cni.projectcalico.org/floatingIPs": '["172.16.0.9"]'})
    store = Store(
        KubernetesBackend(DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": api.url}))
    )
    try:
        for features in (None, {"floating_ips": False}):
            with pytest.raises(CNIError) as info:
                plugin.ipam_add(_call(tmp_path, "ADD", "usePodCidr", features), store)
            assert info.value.code == INVALID_NETCONF
            assert info.value.msg == "requested feature is not enabled: floating_ips"
            assert _held(tmp_path) == []  # refused before host-local ran: nothing to release
        call = _call(tmp_path, "ADD", "usePodCidr", {"floating_ips": True})
        result = plugin.ipam_add(call, store)
        assert result.ips[0].address.split("/")[0] in _held(tmp_path)
        # A pod that is not there is an error, as on the calico-ipam path.
        gone = dataclasses.replace(call, ident=dataclasses.replace(call.ident, workload="b"))
        with pytest.raises(CNIError, match="pod or namespace not found"):
            plugin.ipam_add(gone, store)
    finally:
        store.close()
