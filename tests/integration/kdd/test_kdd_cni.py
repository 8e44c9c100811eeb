"""The calico CNI plugin in Kubernetes mode against the fake API server (real netns, real
plugin binary): ADD patches the pod's cni.projectcalico.org/* annotations and allocates from
IPAM custom resources; DEL blanks the IPs (keeping the containerID) and releases them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cni_fixtures import CNIWorld
from k8s_fake_apiserver import FakeAPIServer
from netns_support import NetnsWorker

from calico.datastore.config import DatastoreConfig
from calico.datastore.kubernetes import KubernetesBackend, crd
from calico.datastore.kubernetes.native import pods

pytestmark = pytest.mark.root
V1 = "crd.projectcalico.org/v1"


def _cr(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    ck = crd.crd_kind(kind, crd.V1)
    assert ck is not None
    return crd.to_cr(ck, crd.V1, name, "", {"metadata": {"name": name}, "spec": spec}, None)


@pytest.fixture
def kube(world: CNIWorld) -> Any:
    """A fake API server listening inside the CNI's host namespace (where the plugin runs)."""
    worker = NetnsWorker(world.host_ns)
    api = worker.call(lambda: FakeAPIServer().start())
    api.put_object(
        V1,
        "clusterinformations",
        _cr("ClusterInformation", "default", {"datastoreReady": True, "clusterGUID": "g"}),
    )
    api.put_object(
        V1,
        "ippools",
        _cr(
            "IPPool",
            "pool",
            {
                "cidr": "10.66.0.0/24",
                "blockSize": 28,
                "ipipMode": "Never",
                "vxlanMode": "Never",
                "nodeSelector": "all()",
            },
        ),
    )
    api.put_object("v1", "namespaces", {"metadata": {"name": "x"}})
    api.put_object(
        "v1",
        "pods",
        {
            "metadata": {"name": "pod-a", "namespace": "x", "labels": {"pod": "a"}},
            "spec": {"nodeName": world.node, "containers": []},
        },
    )
    yield worker, api
    api.stop()
    worker.close()


def _conf(world: CNIWorld) -> dict[str, Any]:
    conf = world.netconf(datastore_type="kubernetes", policy={"type": "k8s"})
    conf.pop("datastore_path")
    return conf


def _args(api: FakeAPIServer, cid: str) -> dict[str, str]:
    return {
        "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE=x;K8S_POD_NAME=pod-a;"
        f"K8S_POD_INFRA_CONTAINER_ID={cid}",
        "K8S_API_ENDPOINT": api.url,
    }


def test_cni_add_del_in_kubernetes_mode(world: CNIWorld, kube: Any) -> None:
    worker, api = kube
    ns = world.workload_ns()
    cid = "feedfacecafe0001"
    res = world.run("calico", world.env("ADD", cid, ns, **_args(api, cid)), _conf(world))
    assert res.returncode == 0, res.stdout + res.stderr
    [ip] = res.doc["ips"]
    assert ip["address"].startswith("10.66.0.")
    pod = api.get_object("v1", "pods", "pod-a", "x")
    ann = pod["metadata"]["annotations"]
    assert ann["cni.projectcalico.org/podIP"] == ip["address"]
    assert ann["cni.projectcalico.org/podIPs"] == ip["address"]
    assert ann["cni.projectcalico.org/containerID"] == cid
    assert pod["metadata"]["labels"] == {"pod": "a"}  # the patch touches annotations only
    blocks = api.store.list(api._res("crd.projectcalico.org", "v1", "ipamblocks"), None, "", "")[0]
    [block] = blocks  # one /28 of the pool, named as upstream names blocks
    start = ip["address"].split("/")[0].rsplit(".", 1)[1]
    assert block["metadata"]["name"] == f"10-66-0-{int(start) & ~15}-28"
    assert block["spec"]["affinity"] == f"host:{world.node}"
    affs = api.store.list(
        api._res("crd.projectcalico.org", "v1", "blockaffinities"),
        None,
        "projectcalico.org/affinity-type=host",
        "",
    )[0]
    assert affs[0]["spec"]["deleted"] == "false" and affs[0]["spec"]["node"] == world.node

    def wep() -> Any:
        b = KubernetesBackend(DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": api.url}))
        try:
            return json.loads(
                b.get(
                    "/calico/resources/v3/projectcalico.org/workloadendpoints/x/"
                    f"{world.node}-k8s-pod--a-eth0"
                ).value
            )
        finally:
            b.close()

    seen = worker.call(wep)
    assert seen["spec"]["ipNetworks"] == [ip["address"]]
    assert seen["spec"]["containerID"] == cid
    assert seen["spec"]["interfaceName"] == res.doc["interfaces"][0]["name"]

    res = world.run("calico", world.env("DEL", cid, ns, **_args(api, cid)), _conf(world))
    assert res.returncode == 0, res.stdout + res.stderr
    ann = api.get_object("v1", "pods", "pod-a", "x")["metadata"]["annotations"]
    assert ann["cni.projectcalico.org/podIP"] == "" and ann["cni.projectcalico.org/podIPs"] == ""
    assert ann["cni.projectcalico.org/containerID"] == cid  # kept, as upstream
    handles = api.store.list(api._res("crd.projectcalico.org", "v1", "ipamhandles"), None, "", "")
    assert handles[0] == []  # released: soft-deleted, then deleted
    assert worker.call(wep)["spec"]["ipNetworks"] == []


def test_calicoctl_style_wep_writes_are_refused_outside_the_cni(kube: Any) -> None:
    worker, api = kube

    def create() -> str:
        b = KubernetesBackend(DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": api.url}))
        try:
            b.create(
                "/calico/resources/v3/projectcalico.org/workloadendpoints/x/n-k8s-p-eth0",
                json.dumps({"spec": {}}),
            )
        except Exception as exc:
            return str(exc)
        finally:
            b.close()
        return "created"

    assert worker.call(create) == (
        "operation Create is not supported on WorkloadEndpoint(x/n-k8s-p-eth0)"
    )


def test_pool_and_address_annotations(world: CNIWorld, kube: Any) -> None:
    _, api = kube
    api.put_object(
        V1,
        "ippools",
        _cr(
            "IPPool",
            "pool2",
            {
                "cidr": "10.67.0.0/24",
                "blockSize": 28,
                "ipipMode": "Never",
                "vxlanMode": "Never",
                "nodeSelector": "all()",
            },
        ),
    )
    api.put_object(
        "v1",
        "namespaces",
        {
            "metadata": {
                "name": "y",
                "annotations": {"cni.projectcalico.org/ipv4pools": '["pool2"]'},
            }
        },
    )

    def pod(name: str, annotations: dict[str, str]) -> dict[str, str]:
        api.put_object(
            "v1",
            "pods",
            {
                "metadata": {"name": name, "namespace": "y", "annotations": annotations},
                "spec": {"nodeName": world.node, "containers": []},
            },
        )
        return {
            "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE=y;K8S_POD_NAME={name}",
            "K8S_API_ENDPOINT": api.url,
        }

    def add(cid: str, args: dict[str, str]) -> Any:
        return world.run("calico", world.env("ADD", cid, world.workload_ns(), **args), _conf(world))

    # The namespace's pool is the default ...
    res = add("cafe0000000000a1", pod("p1", {}))
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.doc["ips"][0]["address"].startswith("10.67.0.")
    # ... a non-empty pod value overrides it ...
    res = add("cafe0000000000a2", pod("p2", {"cni.projectcalico.org/ipv4pools": '["pool"]'}))
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.doc["ips"][0]["address"].startswith("10.66.0.")
    # ... ipAddrs asks for an exact address ...
    res = add("cafe0000000000a3", pod("p3", {"cni.projectcalico.org/ipAddrs": '["10.66.0.77"]'}))
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.doc["ips"][0]["address"] == "10.66.0.77/32"
    # ... and the no-IPAM variant is a clear error, as is a malformed list.
    res = add(
        "cafe0000000000a4", pod("p4", {"cni.projectcalico.org/ipAddrsNoIpam": '["10.66.0.78"]'})
    )
    assert res.returncode != 0 and "ip_addrs_no_ipam" in res.stdout
    res = add("cafe0000000000a5", pod("p5", {"cni.projectcalico.org/ipv4pools": "pool"}))
    assert res.returncode != 0 and "failed to parse pod annotation" in res.stdout
    # floatingIPs needs feature_control.floating_ips; with it the pod's endpoint has the NAT.
    fip = {"cni.projectcalico.org/floatingIPs": '["10.66.0.200"]'}
    res = add("cafe0000000000a6", pod("p6", fip))
    assert res.returncode != 0 and "requested feature is not enabled: floating_ips" in res.stdout
    enabled = {**_conf(world), "feature_control": {"floating_ips": True}}
    env = world.env("ADD", "cafe0000000000a7", world.workload_ns(), **pod("p7", fip))
    res = world.run("calico", env, enabled)
    assert res.returncode == 0, res.stdout + res.stderr
    # The pod as the CNI left it, through the backend's pod conversion.
    wep = pods.pod_to_wep(api.get_object("v1", "pods", "p7", "y"))
    assert wep is not None
    assert wep["spec"]["ipNATs"] == [
        {"internalIP": res.doc["ips"][0]["address"].split("/")[0], "externalIP": "10.66.0.200"}
    ]
