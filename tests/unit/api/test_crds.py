"""The checked-in CRD manifests are generated from the models, current and structural."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from calico.api import crdgen
from calico.api.bgp import BGPPeer
from calico.api.ipam import IPAMBlock

MANIFESTS = Path(__file__).resolve().parents[3] / "manifests" / "crds"


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return crdgen.generate_all()


def test_checked_in_manifests_are_up_to_date(generated: dict[str, str]) -> None:
    assert crdgen.stale(MANIFESTS) == [], "run: python -m calico.api.crdgen --out manifests/crds"
    assert sorted(p.name for p in MANIFESTS.glob("*.yaml")) == sorted(generated)


def test_one_crd_per_registered_kind(generated: dict[str, str]) -> None:
    every = crdgen.load_all_kinds()
    assert len(generated) == len(every)
    for kind in ("IPPool", "FelixConfiguration", "BGPPeer", "Node", "NetworkPolicy"):
        assert kind in every


def test_every_schema_is_structural(generated: dict[str, str]) -> None:
    for name, text in generated.items():
        crd = yaml.safe_load(text)
        assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
        assert crd["kind"] == "CustomResourceDefinition"
        spec = crd["spec"]
        assert spec["group"] == "crd.projectcalico.org"
        assert crd["metadata"]["name"] == f"{spec['names']['plural']}.crd.projectcalico.org"
        assert name == f"crd.projectcalico.org_{spec['names']['plural']}.yaml"
        assert spec["names"]["listKind"] == spec["names"]["kind"] + "List"
        assert spec["scope"] in ("Cluster", "Namespaced")
        [version] = spec["versions"]
        assert version["name"] == "v1" and version["served"] and version["storage"]
        schema = version["schema"]["openAPIV3Schema"]
        assert crdgen.structural_problems(schema) == [], name
        assert "$ref" not in text and "const:" not in text and "title:" not in text


def test_schema_details() -> None:
    peer = crdgen.openapi_schema(BGPPeer)["properties"]["spec"]["properties"]
    assert peer["asNumber"] == {"x-kubernetes-int-or-string": True, "nullable": True}
    assert peer["peerIP"]["type"] == "string"
    assert peer["nextHopMode"]["enum"] == ["Auto", "Self", "Keep"]
    block = crdgen.openapi_schema(IPAMBlock)
    allocations = block["properties"]["spec"]["properties"]["allocations"]
    assert allocations["items"] == {"type": "integer", "nullable": True}
    assert block["required"] == ["metadata", "spec"]
    attrs = block["properties"]["spec"]["properties"]["attributes"]["items"]["properties"]
    assert "handle_id" in attrs
    scopes = {c.KIND: crdgen.crd_for(c)["spec"]["scope"] for c in crdgen.load_all_kinds().values()}
    assert scopes["IPPool"] == "Cluster"
    if "NetworkPolicy" in scopes:
        assert scopes["NetworkPolicy"] == "Namespaced"


def test_structural_checker_finds_problems() -> None:
    bad = {"type": "object", "properties": {"a": {"$ref": "#/x"}, "b": {"properties": {}}}}
    problems = crdgen.structural_problems(bad)
    assert "openAPIV3Schema.properties.a: unsupported keyword $ref" in problems
    assert "openAPIV3Schema.properties.a: no type" in problems
    assert "openAPIV3Schema.properties.b: object without type: object" in problems


def test_check_mode_reports_stale_and_extra_files(tmp_path: Path) -> None:
    assert crdgen.main(["--out", str(tmp_path)]) == 0
    assert crdgen.main(["--out", str(tmp_path), "--check"]) == 0
    target = tmp_path / "crd.projectcalico.org_ippools.yaml"
    target.write_text(target.read_text() + "# edited\n")
    (tmp_path / "crd.projectcalico.org_gone.yaml").write_text("x")
    problems = crdgen.stale(tmp_path)
    assert problems == [
        f"{target}: out of date",
        f"{tmp_path / 'crd.projectcalico.org_gone.yaml'}: no such kind (remove it)",
    ]
    assert crdgen.main(["--out", str(tmp_path), "--check"]) == 1
    target.unlink()
    assert crdgen.stale(tmp_path)[0] == f"{target}: missing"
