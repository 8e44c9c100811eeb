"""create / apply / replace / delete / validate: messages, exit codes, partial success."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ctl_helpers import Ctl

DATA = Path(__file__).resolve().parent / "data"


def pool(name: str, cidr: str, **spec: object) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "projectcalico.org/v3",
            "kind": "IPPool",
            "metadata": {"name": name},
            "spec": {"cidr": cidr, **spec},
        }
    )


def stream(*docs: str) -> str:
    return "---\n".join(docs)


def names(ctl: Ctl, kind: str = "ippool") -> list[str]:
    out = yaml.safe_load(ctl("get", kind, "-o", "yaml").out)
    return [i["metadata"]["name"] for i in out["items"]]


def test_create_then_create_again(ctl: Ctl) -> None:
    r = ctl("create", "-f", str(DATA / "pools.yaml"))
    assert (r.code, r.out, r.err) == (0, "Successfully created 2 'IPPool' resource(s)\n", "")
    r = ctl("create", "-f", str(DATA / "pools.yaml"))
    assert r.code == 1 and r.out == ""
    assert r.err == (
        "failed to create any 'IPPool' resources: [resource already exists: IPPool(pool1)]\n"
    )
    r = ctl("create", "-f", str(DATA / "pools.yaml"), "--skip-exists")
    assert (r.code, r.out) == (0, "Successfully created 2 'IPPool' resource(s)\n")


def test_create_single_resource_failure_message(ctl: Ctl) -> None:
    ctl("create", "-f", "-", stdin=pool("p1", "10.0.0.0/16"))
    r = ctl("create", "-f", "-", stdin=pool("p1", "10.0.0.0/16"))
    assert r.err == "failed to create 'IPPool' resource: [resource already exists: IPPool(p1)]\n"


def test_mixed_kinds_message(ctl: Ctl) -> None:
    r = ctl("create", "-f", str(DATA / "cluster.yaml"))
    assert (r.code, r.out) == (0, "Successfully created 11 resource(s)\n"), r


def test_partial_success_stops_at_first_failure(ctl: Ctl) -> None:
    text = stream(
        pool("a", "10.10.0.0/16"),
        pool("b", "10.11.0.0/16"),
        pool("c", "10.10.1.0/24"),  # overlaps a: rejected by the datastore
        pool("d", "10.12.0.0/16"),
    )
    r = ctl("apply", "-f", "-", stdin=text)
    assert r.code == 1
    assert r.out == "Partial success: applied the first 2 out of 4 'IPPool' resources:\n"
    assert r.err.startswith("hit error: [IPPool(c) CIDR 10.10.1.0/24 overlaps with IPPool(a)")
    assert names(ctl) == ["a", "b"]


def test_partial_success_mixed_kinds_and_replace_wording(ctl: Ctl) -> None:
    ctl("create", "-f", "-", stdin=pool("a", "10.10.0.0/16"))
    text = stream(pool("a", "10.10.0.0/16", natOutgoing=True), pool("zz", "10.20.0.0/16"))
    r = ctl("replace", "-f", "-", stdin=text)
    assert r.code == 1
    assert r.out == "Partial success: replaced the first 1 out of 2 'IPPool' resources:\n"
    assert r.err == "hit error: resource does not exist: IPPool(zz) with error: <nil>\n"
    r = ctl("replace", "-f", "-", stdin=pool("zz", "10.20.0.0/16"))
    assert r.err == (
        "failed to replace 'IPPool' resource: resource does not exist: IPPool(zz) "
        "with error: <nil>\n"
    )


def test_invalid_later_document_stops_there(ctl: Ctl) -> None:
    """Validation is per document, in order (upstream's client validates on write)."""
    text = stream(pool("a", "10.10.0.0/16"), pool("b", "10.11.0.0/33"), pool("c", "10.12.0.0/16"))
    r = ctl("apply", "-f", "-", stdin=text)
    assert r.code == 1
    assert r.out == "Partial success: applied the first 1 out of 3 'IPPool' resources:\n"
    assert r.err.startswith("hit error: [error with field IPPool.Spec.CIDR = '10.11.0.0/33' (")
    assert names(ctl) == ["a"]


def test_undecodable_later_document_writes_nothing(ctl: Ctl) -> None:
    text = stream(pool("a", "10.10.0.0/16"), pool("b", "10.11.0.0/16", colour="red"))
    r = ctl("apply", "-f", "-", stdin=text)
    assert r.code == 1 and r.out == ""
    assert r.err == (
        "failed to execute command: <stdin>, document 2, IPPool(b): field in document is not "
        "recognized or is in the wrong location: colour\n"
    )
    assert names(ctl) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: p\n",
            "failed to execute command: f.yaml, document 1: invalid YAML",
        ),
        (
            "apiVersion: projectcalico.org/v3\nkind: Bogus\nmetadata: {name: p}\n",
            "failed to execute command: f.yaml, document 1: unknown resource type (Bogus) and/or "
            "version (projectcalico.org/v3)",
        ),
        (
            pool("p", "10.0.0.0/16", colour="red"),
            "failed to execute command: f.yaml, document 1, IPPool(p): field in document is not "
            "recognized or is in the wrong location: colour",
        ),
        ("", "no resources specified in file f.yaml"),
    ],
)
def test_bad_input_is_one_located_message(ctl: Ctl, tmp_path: Path, text: str, expected: str):
    (tmp_path / "f.yaml").write_text(text)
    for verb in ("create", "apply", "replace", "validate"):
        r = ctl(verb, "-f", str(tmp_path / "f.yaml"))
        assert r.code == 1, r
        assert r.err.replace(str(tmp_path) + "/", "").startswith(expected), r
        assert "Traceback" not in r.err and r.out == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            pool("p", "10.0.0.0/16", nodeSelector="a ==="),
            "error with field NodeSelector = 'a ===' (invalid selector",
        ),
        (
            pool("p", "10.0.0.300/16"),
            "error with field IPPool.Spec.CIDR = '10.0.0.300/16' ('10.0.0.300/16' is not a valid",
        ),
    ],
)
def test_invalid_resource_is_upstreams_validation_error(
    ctl: Ctl, tmp_path: Path, text: str, expected: str
):
    (tmp_path / "f.yaml").write_text(text)
    for verb in ("create", "apply", "replace", "validate"):
        r = ctl(verb, "-f", str(tmp_path / "f.yaml"))
        assert r.code == 1 and r.out == "", r
        bracket = "" if verb == "replace" else "["
        assert r.err.startswith(f"failed to {verb} 'IPPool' resource: {bracket}{expected}"), r


def test_missing_file(ctl: Ctl, tmp_path: Path) -> None:
    r = ctl("apply", "-f", str(tmp_path / "nope.yaml"))
    assert r.code == 1
    assert r.err.startswith("failed to execute command: open ") and "nope.yaml" in r.err


def test_directory_and_recursive(ctl: Ctl, tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(pool("a", "10.10.0.0/16"))
    (tmp_path / "ignored.txt").write_text("not yaml: [")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.yml").write_text(pool("b", "10.11.0.0/16"))
    r = ctl("apply", "-f", str(tmp_path))
    assert r.out == "Successfully applied 1 'IPPool' resource(s)\n", r
    r = ctl("apply", "-f", str(tmp_path), "-R")
    assert r.out == "Successfully applied 2 'IPPool' resource(s)\n", r
    (tmp_path / "empty").mkdir()
    r = ctl("apply", "-f", str(tmp_path / "empty"))
    assert (r.code, r.err) == (1, f"no resources specified in directory {tmp_path / 'empty'}\n")
    r = ctl("apply", "-f", str(tmp_path / "empty"), "--skip-empty")
    assert (r.code, r.out) == (0, "No resources specified\n")


def test_apply_updates_and_keeps_server_metadata(ctl: Ctl) -> None:
    ctl("apply", "-f", "-", stdin=pool("a", "10.10.0.0/16"))
    before = yaml.safe_load(ctl("get", "ippool", "a", "-o", "yaml").out)
    r = ctl("apply", "-f", "-", stdin=pool("a", "10.10.0.0/16", natOutgoing=True))
    assert r.out == "Successfully applied 1 'IPPool' resource(s)\n"
    after = yaml.safe_load(ctl("get", "ippool", "a", "-o", "yaml").out)
    assert after["spec"]["natOutgoing"] is True
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]


def test_replace_with_stale_resource_version_conflicts(ctl: Ctl) -> None:
    ctl("create", "-f", "-", stdin=pool("a", "10.10.0.0/16"))
    current = ctl("get", "ippool", "a", "-o", "yaml").out
    doc = yaml.safe_load(current)
    stale = doc["metadata"]["resourceVersion"]
    doc["spec"]["natOutgoing"] = True
    assert ctl("replace", "-f", "-", stdin=yaml.safe_dump(doc)).code == 0
    r = ctl("replace", "-f", "-", stdin=yaml.safe_dump(doc))
    assert r.code == 1
    assert r.err.startswith(
        f"failed to replace 'IPPool' resource: update conflict: IPPool(a): Resource version "
        f"'{stale}' is out of date"
    ), r
    r = ctl("apply", "-f", "-", stdin=yaml.safe_dump(doc))
    assert "update conflict: IPPool(a)" in r.err, r


def test_apply_cluster_information_is_refused(ctl: Ctl) -> None:
    text = (
        "apiVersion: projectcalico.org/v3\nkind: ClusterInformation\n"
        "metadata: {name: default}\nspec: {}\n"
    )
    r = ctl("apply", "-f", "-", stdin=text)
    assert r.err == (
        "failed to apply 'ClusterInformation' resource: [operation apply is not supported on "
        "ClusterInformation: resource is readonly]\n"
    )


def test_namespace_rules_on_write(ctl: Ctl) -> None:
    np = (
        "apiVersion: projectcalico.org/v3\nkind: NetworkPolicy\n"
        "metadata: {name: p, namespace: prod}\nspec: {selector: all()}\n"
    )
    r = ctl("create", "-f", "-", "-n", "dev", stdin=np)
    assert r.err == (
        "failed to create 'NetworkPolicy' resource: [resource namespace does not match client "
        "namespace. prod != dev]\n"
    )
    r = ctl("create", "-f", "-", "-n", "dev", stdin=pool("a", "10.10.0.0/16"))
    assert r.err == "failed to create 'IPPool' resource: [IPPool is not namespaced]\n"
    unnamespaced = np.replace(", namespace: prod", "")
    assert ctl("create", "-f", "-", stdin=unnamespaced).code == 0
    assert ctl("create", "-f", "-", "-n", "dev", stdin=unnamespaced).code == 0
    out = ctl("get", "np", "-A").out
    assert "default     p" in out and "dev         p" in out


def test_delete_by_name_and_file(ctl: Ctl) -> None:
    ctl("create", "-f", str(DATA / "pools.yaml"))
    r = ctl("delete", "ippool", "pool1", "nope")
    assert r.code == 1
    assert r.out == "Successfully deleted 1 'IPPool' resource(s)\n"
    assert r.err == (
        "Failed to delete 'IPPool' resource: resource does not exist: IPPool(nope) "
        "with error: <nil>\n"
    )
    r = ctl("delete", "-f", str(DATA / "pools.yaml"))
    assert r.code == 1 and r.out == "Successfully deleted 1 'IPPool' resource(s)\n"
    r = ctl("delete", "-f", str(DATA / "pools.yaml"), "--skip-not-exists")
    assert (r.code, r.out) == (0, "Successfully deleted 2 'IPPool' resource(s)\n")
    r = ctl("delete", "ippool")
    assert (r.code, r.err) == (1, "No resources specified\n")
    r = ctl("delete", "bogus", "x")
    assert (r.code, r.err) == (1, "resource type 'bogus' is not supported\n")


def test_delete_namespaced_defaults_to_default(ctl: Ctl) -> None:
    ctl("create", "-f", str(DATA / "cluster.yaml"))
    assert ctl("delete", "np", "deny-all").code == 1
    r = ctl("delete", "np", "deny-all", "-n", "prod")
    assert r.out == "Successfully deleted 1 'NetworkPolicy' resource(s)\n", r
    assert ctl("delete", "policy", "allow-web").code == 0


def test_validate_writes_nothing(ctl: Ctl) -> None:
    r = ctl("validate", "-f", str(DATA / "cluster.yaml"))
    assert (r.code, r.out) == (0, "Successfully validated 11 resource(s)\n")
    # A new datastore has only the built-in tiers (upstream's EnsureInitialized creates them).
    assert names(ctl, "tier") in ([], ["kube-admin", "default", "kube-baseline"])
    assert names(ctl, "gnp") == [] and names(ctl, "node") == []
