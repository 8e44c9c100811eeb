"""datastore migrate: export from the embedded datastore, import into Kubernetes (the fake API
server): Calico kinds become CRs, Nodes update the Kubernetes Nodes' annotations (a node with
no Kubernetes Node is skipped with upstream's warning), raw IPAM keys become IPAM CRs."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from k8s_fake_apiserver import FakeAPIServer

CTL = Path(__file__).resolve().parent.parent / "calicoctl"
sys.path.insert(0, str(CTL))
from ctl_helpers import datastore_env, invoke, run_bin  # noqa: E402

from calico.datastore.local import LocalBackend  # noqa: E402

V1 = "crd.projectcalico.org/v1"
IPAM_KEY = "/calico/ipam/v2/assignment/ipv4/block/10.1.0.0-26"


@pytest.fixture
def api() -> Iterator[FakeAPIServer]:
    with FakeAPIServer() as server:
        yield server


def test_local_to_kubernetes(
    tmp_path: Path, request: pytest.FixtureRequest, api: FakeAPIServer
) -> None:
    src = datastore_env("local", tmp_path, request)
    for name in ("pools.yaml", "cluster.yaml"):
        assert invoke(src, "create", "-f", str(CTL / "data" / name)).code == 0
    local = LocalBackend(src["CALICO_DATASTORE_PATH"])
    local.create(IPAM_KEY, '{"cidr":"10.1.0.0/26","allocations":[0,null],"unallocated":[1]}')
    local.close()
    assert invoke(src, "datastore", "migrate", "lock").code == 0
    exported = run_bin(src, "datastore", "migrate", "export")
    assert exported.code == 0, exported
    dump = tmp_path / "calico-data"
    dump.write_text(exported.out)

    api.put_object("v1", "nodes", {"metadata": {"name": "node1", "labels": {"k8s": "yes"}}})
    dst = {"DATASTORE_TYPE": "kubernetes", "K8S_API_ENDPOINT": api.url}
    r = run_bin(dst, "datastore", "migrate", "import", "-f", str(dump))
    assert r.code == 0, r
    assert "[WARNING] Attempted to import node node2 that references a nonexistent" in r.out
    assert "Successfully applied 1 IPAM resource(s)" in r.out
    pools = sorted(
        p["metadata"]["name"]
        for p in api.store.list(api._res("crd.projectcalico.org", "v1", "ippools"), None, "", "")[0]
    )
    assert pools == ["pool1", "pool2"]
    gnp = api.get_object(V1, "globalnetworkpolicies", "security.block-metadata")
    assert gnp["spec"]["tier"] == "security"
    node = api.get_object("v1", "nodes", "node1")
    assert node["metadata"]["labels"] == {"k8s": "yes"}  # Kubernetes labels untouched
    assert "projectcalico.org/IPv4Address" in node["metadata"]["annotations"]
    block = api.get_object(V1, "ipamblocks", "10-1-0-0-26")
    assert block["spec"]["cidr"] == "10.1.0.0/26" and block["spec"]["allocations"] == [0, None]
    info = api.get_object(V1, "clusterinformations", "default")
    assert info["spec"]["datastoreReady"] is False  # locked until unlock
    assert run_bin(dst, "datastore", "migrate", "unlock").out == "Datastore unlocked.\n"
    assert api.get_object(V1, "clusterinformations", "default")["spec"]["datastoreReady"] is True

    # Existing Calico data (but not nodes or namespace profiles) blocks a second import.
    again = run_bin(dst, "datastore", "migrate", "import", "-f", str(dump))
    assert again.code == 1
    assert "Datastore already has Calico resources: Found existing Calico " in again.err
