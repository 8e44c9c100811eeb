"""patch, label and version through the command line."""

from __future__ import annotations

from pathlib import Path

import yaml
from ctl_helpers import Ctl, set_cluster_version

DATA = Path(__file__).resolve().parent / "data"


def spec(ctl: Ctl, *args: str) -> dict:
    return yaml.safe_load(ctl("get", *args, "-o", "yaml").out)


def test_patch_types(ctl: Ctl) -> None:
    ctl("create", "-f", str(DATA / "pools.yaml"))
    r = ctl("patch", "ippool", "pool1", "-p", '{"spec":{"natOutgoing":false,"disabled":true}}')
    assert (r.code, r.out) == (0, "Successfully patched 1 'IPPool' resource\n"), r
    got = spec(ctl, "ippool", "pool1")["spec"]  # false is not printed (omitempty)
    assert ("natOutgoing" in got, got["disabled"], got["ipipMode"]) == (False, True, "Always")
    r = ctl(
        "patch", "pool", "pool1", "--type", "json",
        "-p", '[{"op":"replace","path":"/spec/ipipMode","value":"Never"}]',
    )  # fmt: skip
    assert r.code == 0, r
    assert spec(ctl, "ippool", "pool1")["spec"]["ipipMode"] == "Never"
    r = ctl("patch", "ippool", "pool2", "-t", "merge", "-p", '{"metadata":{"labels":null}}')
    assert r.code == 0
    assert "labels" not in spec(ctl, "ippool", "pool2")["metadata"]


def test_patch_errors(ctl: Ctl) -> None:
    ctl("create", "-f", str(DATA / "pools.yaml"))
    r = ctl("patch", "ippool", "nope", "-p", "{}")
    assert (r.code, r.err) == (
        1,
        "hit error: resource does not exist: IPPool(nope) with error: <nil>\n",
    )
    r = ctl("patch", "ippool", "pool1", "-p", '{"spec":{"cidr":"10.1.0.0/33"}}')
    assert r.code == 1
    assert r.err.startswith("hit error: creating resource from patched data: ")
    assert "error with field IPPool.Spec.CIDR = '10.1.0.0/33'" in r.err
    assert spec(ctl, "ippool", "pool1")["spec"]["cidr"] == "10.1.0.0/16"
    r = ctl("patch", "ippool", "pool1", "-p", "{not json")
    assert r.code == 1 and r.err.startswith("hit error: invalid patch: not valid JSON")
    r = ctl("patch", "ippool", "pool1", "-t", "json", "-p", '[{"op":"remove","path":"/x/y"}]')
    assert r.code == 1 and "path /x/y does not exist" in r.err
    r = ctl("patch", "ippool", "pool1", "-p", '{"metadata":{"name":"other"}}')
    assert r.code == 1 and "may not change the resource's name" in r.err


def test_label_flow(ctl: Ctl) -> None:
    ctl("create", "-f", str(DATA / "cluster.yaml"))
    r = ctl("label", "nodes", "node1", "cluster=frontend")
    assert (r.code, r.out) == (0, "Successfully set label cluster on nodes node1\n")
    r = ctl("label", "nodes", "node1", "cluster=backend")
    assert (r.code, r.err) == (
        1,
        "failed to update label of nodes node1, key cluster is already present. please use "
        "'--overwrite' to set a new value\n",
    )
    r = ctl("label", "nodes", "node1", "cluster=backend", "--overwrite")
    assert r.out == "Successfully updated label cluster on nodes node1\n"
    assert spec(ctl, "node", "node1")["metadata"]["labels"] == {"cluster": "backend"}
    r = ctl("label", "nodes", "node1", "cluster", "--remove")
    assert r.out == "Successfully removed label cluster from nodes node1\n"
    assert "labels" not in spec(ctl, "node", "node1")["metadata"]
    r = ctl("label", "nodes", "node1", "cluster", "--remove")
    assert r.err == "cannot remove label of nodes node1, key cluster does not exist\n"
    assert ctl("label", "nodes", "ghost", "a=b").err == "nodes ghost not found\n"
    assert ctl("label", "nodes", "node1", "novalue").err == "invalid label novalue\n"
    r = ctl("label", "np", "deny-all", "tier=gold", "-n", "prod")
    assert r.code == 0, r
    r = ctl("label", "nodes", "node1", "bad key=x")
    assert r.code == 1
    assert r.err.startswith("failed to update nodes node1, label not changed: ")


def test_version(ctl: Ctl) -> None:
    ctl("create", "-f", str(DATA / "pools.yaml"))
    r = ctl("version")
    lines = r.out.splitlines()
    assert r.code == 0, r
    assert [line.split(":")[0] for line in lines] == [
        "Client Version",
        "Git commit",
        "Cluster Version",
        "Cluster Type",
    ]
    assert lines[0].split()[-1] == lines[2].split()[-1]
    assert lines[3] == "Cluster Type:      unknown"
    r = ctl("version", "--client")
    assert len(r.out.splitlines()) == 2


def test_version_mismatch_check(ctl: Ctl, ds_env: dict[str, str]) -> None:
    ctl("create", "-f", str(DATA / "pools.yaml"))
    set_cluster_version(ds_env, "v1.2.3-rc1")  # ClusterInformation is not the user's to write
    r = ctl("get", "ippool")
    assert r.code == 1
    assert r.err.startswith("failed to get resources: Version mismatch.\nClient Version:   ")
    assert "Cluster Version:  1.2.3\nUse --allow-version-mismatch to override.\n" in r.err
    r = ctl("create", "-f", str(DATA / "pools.yaml"))
    assert r.err.startswith("Version mismatch.\n")
    assert ctl("get", "ippool", "--allow-version-mismatch").code == 0
    assert ctl("--allow-version-mismatch", "get", "ippool").code == 0
    assert ctl("version").out.splitlines()[2] == "Cluster Version:   v1.2.3-rc1"


def test_version_check_reads_raw_json_and_falls_back_to_validation(
    ctl: Ctl, ds_env: dict[str, str]
) -> None:
    """The check reads calicoVersion from the stored JSON; a value it cannot read plainly
    (here a number) goes through the validating client, whose error is reported."""
    import json

    from calico.datastore import config as dsconfig
    from calico.datastore.factory import open_backend
    from calico.model.resources import resource_prefix

    ctl("create", "-f", str(DATA / "pools.yaml"))  # initialises ClusterInformation
    key = resource_prefix("ClusterInformation") + "default"
    backend = open_backend(dsconfig.from_env(dict(ds_env)))
    try:
        stored = json.loads(backend.get(key).value)
        stored["spec"]["calicoVersion"] = "v9.9.9"
        backend.apply(key, json.dumps(stored))
        r = ctl("get", "ippool")
        assert r.code == 1 and "Cluster Version:  9.9.9\n" in r.err, r
        stored["spec"]["calicoVersion"] = 3
        backend.apply(key, json.dumps(stored))
        r = ctl("get", "ippool")
        assert (r.code, r.err) == (1, "error with field CalicoVersion = '3' (must be a string)\n")
    finally:
        backend.close()
