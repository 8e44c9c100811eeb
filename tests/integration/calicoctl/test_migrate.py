"""datastore migrate: lock, export from the embedded datastore, import into etcd, unlock."""

from __future__ import annotations

from pathlib import Path

import yaml
from ctl_helpers import datastore_env, invoke, run_bin

from calico.datastore.client import Client
from calico.datastore.etcd import EtcdBackend
from calico.datastore.local import LocalBackend

DATA = Path(__file__).resolve().parent / "data"
KINDS = ("tier", "ippool", "gnp", "bgpconfig", "bgppeer", "node", "hep", "clusterinfo")
IPAM_KEY = "/calico/ipam/v2/assignment/ipv4/block/10.1.0.0-26"


def comparable(env: dict[str, str], kind: str) -> list[dict]:
    """``get KIND -A -o yaml`` items without server-set metadata."""
    args = ["get", kind, "-o", "yaml"]
    out = yaml.safe_load(invoke(env, *args).out)
    items = out["items"]
    for item in items:
        for key in ("uid", "resourceVersion", "creationTimestamp"):
            item["metadata"].pop(key, None)
    return items


def comparable_ns(env: dict[str, str], kind: str) -> list[dict]:
    out = yaml.safe_load(invoke(env, "get", kind, "-A", "-o", "yaml").out)
    for item in out["items"]:
        for key in ("uid", "resourceVersion", "creationTimestamp"):
            item["metadata"].pop(key, None)
    return out["items"]


def test_local_to_etcd_round_trip(tmp_path: Path, request) -> None:
    src = datastore_env("local", tmp_path, request)
    dst = datastore_env("etcdv3", tmp_path, request)
    for name in ("pools.yaml", "cluster.yaml"):
        assert invoke(src, "create", "-f", str(DATA / name)).code == 0
    local = LocalBackend(src["CALICO_DATASTORE_PATH"])
    local.create(IPAM_KEY, '{"cidr":"10.1.0.0/26","allocations":[0,null]}')
    local.close()

    r = invoke(src, "datastore", "migrate", "export")
    assert r.code == 1 and "datastore is not locked" in r.err
    assert invoke(src, "datastore", "migrate", "lock").out == "Datastore locked.\n"
    exported = run_bin(src, "datastore", "migrate", "export")
    assert exported.code == 0, exported
    dump = tmp_path / "calico-data"
    dump.write_text(exported.out)

    # A target initialised by node startup (ClusterInformation and the built-in tiers) counts
    # as empty.
    target = EtcdBackend(dst["ETCD_ENDPOINTS"])
    try:
        Client(target).ensure_initialized("v3.31.0")
    finally:
        target.close()
    r = run_bin(dst, "datastore", "migrate", "import", "-f", str(dump))
    assert r.code == 0, r
    # The export carries every Tier, including the built-in default, kube-admin and
    # kube-baseline ones the source's initialisation created.
    assert r.out.splitlines()[0] == "Successfully applied 16 resource(s)"
    assert "Successfully applied 1 IPAM resource(s)" in r.out
    assert invoke(dst, "get", "ippool").code == 0
    target_info = yaml.safe_load(invoke(dst, "get", "clusterinfo", "default", "-o", "yaml").out)
    source_info = yaml.safe_load(invoke(src, "get", "clusterinfo", "default", "-o", "yaml").out)
    assert target_info["spec"]["clusterGUID"] == source_info["spec"]["clusterGUID"]
    assert target_info["spec"]["datastoreReady"] is False
    assert invoke(dst, "datastore", "migrate", "unlock").out == "Datastore unlocked.\n"
    assert invoke(src, "datastore", "migrate", "unlock").code == 0

    for kind in KINDS:
        assert comparable(src, kind) == comparable(dst, kind), kind
    for kind in ("networkpolicy", "networkset"):
        assert comparable_ns(src, kind) == comparable_ns(dst, kind), kind
    etcd = EtcdBackend(dst["ETCD_ENDPOINTS"])
    try:
        assert etcd.get(IPAM_KEY).value == '{"cidr":"10.1.0.0/26","allocations":[0,null]}'
    finally:
        etcd.close()

    again = invoke(dst, "datastore", "migrate", "import", "-f", str(dump))
    assert again.code == 1
    assert again.err.startswith("Datastore already has Calico resources: Found existing Calico ")


def test_import_validates_everything_first(tmp_path: Path, request) -> None:
    dst = datastore_env("local", tmp_path, request)
    bad = tmp_path / "bad"
    bad.write_text("---\napiVersion: projectcalico.org/v3\nkind: IPPool\n===\n{}\n===\n")
    r = invoke(dst, "datastore", "migrate", "import", "-f", str(bad))
    assert r.code == 1 and r.err.startswith("Error while reading migration file: ")
    bad.write_text("just one section\n")
    r = invoke(dst, "datastore", "migrate", "import", "-f", str(bad))
    assert r.err == (
        f"Imported file: {bad} is improperly formatted. Try recreating with "
        "'calicoctl datastore migrate export'\n"
    )
    assert yaml.safe_load(invoke(dst, "get", "ippool", "-o", "yaml").out)["items"] == []
