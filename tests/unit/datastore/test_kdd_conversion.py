"""Kubernetes-datastore conversions against the reference's vectors (kdd.md §2, §5)."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.datastore.errors import (
    InvalidValueError,
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
    UpdateConflictError,
)
from calico.datastore.kubernetes import crd
from calico.datastore.kubernetes.errors import KubeAPIError, translate
from calico.datastore.kubernetes.names import cidr_to_name, hostname_hash
from calico.datastore.kubernetes.uids import convert_uid


def test_uid_conversion_vector_and_inverse() -> None:
    a, b = "30316465-6365-4463-ad63-3564622d3638", "0c8c26a6-c6a6-44c6-adc6-ac2646b46c1c"
    assert convert_uid(a) == b
    assert convert_uid(b) == a
    with pytest.raises(InvalidValueError, match="not a UUID"):
        convert_uid("nope")


@given(st.uuids())
def test_uid_conversion_is_self_inverse_and_keeps_version(u: uuid.UUID) -> None:
    out = convert_uid(str(u))
    assert convert_uid(out) == str(u)
    assert uuid.UUID(out).bytes[6] == u.bytes[6] and uuid.UUID(out).bytes[8] == u.bytes[8]


def test_cidr_names_and_hostname_hash() -> None:
    assert cidr_to_name("10.0.1.0/26") == "10-0-1-0-26"
    assert cidr_to_name("fd80:24e2:f998:72d6::/122") == "fd80-24e2-f998-72d6---122"
    assert hostname_hash("node1") == "7DS2CCNJGGLTHBDQLLFO6SX24SY2YDDEG3W2VN556FA2W4DLLV5A"


POOL = crd.crd_kind("IPPool", crd.V1)


def test_v1_cr_keeps_only_our_labels_and_the_metadata_annotation() -> None:
    assert POOL is not None
    value = {
        "metadata": {
            "name": "p1",
            "uid": "30316465-6365-4463-ad63-3564622d3638",
            "labels": {"foo": "bar", "projectcalico.org/foo": "bar"},
            "annotations": {"note": "x"},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"cidr": "10.0.0.0/16"},
    }
    cr = crd.to_cr(POOL, crd.V1, "p1", "", value, 7)
    meta = cr["metadata"]
    assert cr["apiVersion"] == "crd.projectcalico.org/v1" and cr["kind"] == "IPPool"
    assert meta["labels"] == {"projectcalico.org/foo": "bar"}
    assert meta["resourceVersion"] == "7"
    assert meta["uid"] == "0c8c26a6-c6a6-44c6-adc6-ac2646b46c1c"
    stored = json.loads(meta["annotations"][crd.METADATA_ANNOTATION])
    assert stored == {
        "annotations": {"note": "x"},
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {"foo": "bar", "projectcalico.org/foo": "bar"},
    }  # no name (not a policy kind), no uid/namespace/resourceVersion
    back = crd.from_cr(POOL, crd.V1, {**cr, "metadata": {**meta, "resourceVersion": "9"}})
    assert back["metadata"] == {
        "name": "p1",
        "uid": "30316465-6365-4463-ad63-3564622d3638",
        "labels": {"foo": "bar", "projectcalico.org/foo": "bar"},
        "annotations": {"note": "x"},
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    assert back["apiVersion"] == "projectcalico.org/v3" and back["spec"] == value["spec"]


def test_policy_names_keep_or_strip_the_default_prefix() -> None:
    gnp = crd.crd_kind("GlobalNetworkPolicy", crd.V1)
    assert gnp is not None
    cr = crd.to_cr(gnp, crd.V1, "allow", "", {"metadata": {"name": "allow"}, "spec": {}}, None)
    assert json.loads(cr["metadata"]["annotations"][crd.METADATA_ANNOTATION])["name"] == "allow"
    legacy = {"metadata": {"name": "default.allow", "uid": str(uuid.uuid4())}, "spec": {}}
    assert crd.from_cr(gnp, crd.V1, legacy)["metadata"]["name"] == "allow"
    other = {"metadata": {"name": "sec.allow"}, "spec": {"tier": "sec"}}
    assert crd.from_cr(gnp, crd.V1, other)["metadata"]["name"] == "sec.allow"


def test_ipam_kinds_as_upstream_stores_them() -> None:
    cfg = crd.crd_kind("IPAMConfiguration", crd.V1)
    assert cfg is not None and (cfg.plural, cfg.cr_kind) == ("ipamconfigs", "IPAMConfig")
    v3cfg = crd.crd_kind("IPAMConfiguration", crd.V3)
    assert v3cfg is not None and v3cfg.plural == "ipamconfigurations"
    aff = crd.crd_kind("BlockAffinity", crd.V1)
    assert aff is not None
    spec = {"node": "node1", "cidr": "10.0.1.0/26", "state": "confirmed", "deleted": False}
    cr = crd.to_cr(aff, crd.V1, "node1-10-0-1-0-26", "", {"metadata": {}, "spec": spec}, None)
    assert cr["spec"]["deleted"] == "false"  # a string in v1
    assert cr["metadata"]["labels"] == {
        "projectcalico.org/hostname-hash": hostname_hash("node1"),
        "projectcalico.org/affinity-type": "host",
        "projectcalico.org/ip-version": "4",
    }
    assert crd.METADATA_ANNOTATION not in cr["metadata"].get("annotations", {})
    back = crd.from_cr(
        aff, crd.V1, {**cr, "metadata": {**cr["metadata"], "uid": str(uuid.uuid4())}}
    )
    assert back["spec"]["deleted"] is False and back["spec"]["type"] == "host"
    assert crd.is_soft_deleted(aff, {"spec": {"deleted": "true"}})
    assert not crd.is_soft_deleted(POOL, {"spec": {"deleted": True}})  # type: ignore[arg-type]


def test_tier_read_defaults() -> None:
    tier = crd.crd_kind("Tier", crd.V1)
    assert tier is not None
    out = crd.from_cr(tier, crd.V1, {"metadata": {"name": "t"}, "spec": {}})
    assert out["spec"] == {"order": 1_000_000, "defaultAction": "Deny"}


def test_native_kinds_are_not_crds() -> None:
    for kind in ("Node", "WorkloadEndpoint", "Profile", "KubernetesService"):
        assert crd.crd_kind(kind, crd.V1) is None
    assert "nodes" not in crd.crd_kinds_by_plural(crd.V1)


def _err(
    code: int, reason: str = "", message: str = "", causes: list | None = None
) -> KubeAPIError:
    status = {"reason": reason, "message": message, "code": code}
    if causes:
        status["details"] = {"causes": [{"type": "FieldValueInvalid", "field": f} for f in causes]}
    return KubeAPIError(code, status, "test")


@pytest.mark.parametrize(
    ("err", "expected"),
    [
        (_err(404, "NotFound"), ResourceDoesNotExistError),
        (_err(409, "AlreadyExists"), ResourceAlreadyExistsError),
        (
            _err(409, "Conflict", "Precondition failed: UID in precondition: a"),
            ResourceDoesNotExistError,
        ),
        (_err(409, "Conflict", "the object has been modified"), UpdateConflictError),
        (_err(422, "Invalid", "", ["metadata.uid"]), ResourceDoesNotExistError),
        (_err(422, "Invalid", "", ["metadata.resourceVersion"]), UpdateConflictError),
    ],
)
def test_error_mapping(err: KubeAPIError, expected: type) -> None:
    assert isinstance(translate(err, "/k"), expected)


def test_other_errors_stay_datastore_errors() -> None:
    err = _err(422, "Invalid", "bad", ["spec.cidr"])
    assert translate(err, "/k") is err
