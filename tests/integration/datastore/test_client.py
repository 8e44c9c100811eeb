"""The typed client on every backend: metadata, CAS, cross-resource rules, initialisation."""

from __future__ import annotations

import pytest

from calico.api import load_documents
from calico.api.base import Resource
from calico.api.errors import ResourceValidationError
from calico.datastore import (
    Backend,
    EventType,
    InvalidValueError,
    OperationNotSupportedError,
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
    UpdateConflictError,
)
from calico.datastore.client import Client, kind_prefix, resource_path


def one(text: str) -> Resource:
    (res,) = load_documents(text)
    return res


POOL = """
apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {name: %s}
spec: {cidr: %s}
"""

NP = """
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: allow-web, namespace: prod}
spec:
  selector: app == "web"
  ingress:
  - action: Allow
    protocol: TCP
    destination: {ports: [80]}
"""


@pytest.fixture
def client(backend: Backend) -> Client:
    return Client(backend)


def test_paths() -> None:
    assert resource_path("IPPool", "p1") == "/calico/resources/v3/projectcalico.org/ippools/p1"
    assert (
        resource_path("NetworkPolicy", "a", "ns1")
        == "/calico/resources/v3/projectcalico.org/networkpolicies/ns1/a"
    )
    assert kind_prefix("NetworkPolicy") == "/calico/resources/v3/projectcalico.org/networkpolicies/"
    with pytest.raises(InvalidValueError, match="namespace is required"):
        resource_path("NetworkPolicy", "a")


def test_create_sets_server_metadata(client: Client) -> None:
    created = client.create(one(POOL % ("p1", "10.1.0.0/16")))
    meta = created.metadata
    assert meta.uid and meta.creation_timestamp and meta.resource_version
    got = client.get("IPPool", "p1")
    assert got == created
    assert got.spec.block_size == 26  # type: ignore[attr-defined]


def test_create_twice_and_missing(client: Client) -> None:
    client.create(one(POOL % ("p1", "10.1.0.0/16")))
    with pytest.raises(ResourceAlreadyExistsError, match=r"IPPool\(p1\)"):
        client.create(one(POOL % ("p1", "10.1.0.0/16")))
    with pytest.raises(ResourceDoesNotExistError, match=r"resource does not exist: IPPool\(p9\)"):
        client.get("IPPool", "p9")
    with pytest.raises(ResourceDoesNotExistError):
        client.delete("ippools", "p9")


def test_create_rejects_resource_version(client: Client) -> None:
    res = one(POOL % ("p1", "10.1.0.0/16"))
    res.metadata.resource_version = "12"
    with pytest.raises(InvalidValueError, match="must not be set on create"):
        client.create(res)


def test_update_cas_and_server_owned_fields(client: Client) -> None:
    created = client.create(one(NP))
    changed = created.model_copy(deep=True)
    changed.spec.order = 10  # type: ignore[attr-defined]
    updated = client.update(changed)
    assert int(updated.metadata.resource_version or 0) > int(created.metadata.resource_version or 0)
    assert updated.metadata.uid == created.metadata.uid
    assert updated.metadata.creation_timestamp == created.metadata.creation_timestamp
    with pytest.raises(
        UpdateConflictError, match=r"update conflict: NetworkPolicy\(prod/allow-web"
    ):
        client.update(changed)  # stale resourceVersion
    blind = one(NP)
    blind.metadata.namespace = "prod"
    assert client.update(blind).spec.order is None  # type: ignore[attr-defined]


def test_apply_creates_then_updates(client: Client) -> None:
    first = client.apply(one(POOL % ("p1", "10.1.0.0/16")))
    second = client.apply(one(POOL % ("p1", "10.1.0.0/16")))
    assert second.metadata.uid == first.metadata.uid
    assert len(client.list("IPPool").items) == 1


def test_delete_with_revision_and_uid(client: Client) -> None:
    created = client.create(one(POOL % ("p1", "10.1.0.0/16")))
    with pytest.raises(UpdateConflictError):
        stale = str(int(created.metadata.resource_version or 0) + 100)
        client.delete("IPPool", "p1", resource_version=stale)
    with pytest.raises(UpdateConflictError, match="uid"):
        client.delete("IPPool", "p1", uid="not-the-uid")
    gone = client.delete("IPPool", "p1", uid=created.metadata.uid)
    assert gone.metadata.name == "p1"
    assert client.list("IPPool").items == []


def test_list_namespaces_and_prefix(client: Client) -> None:
    for ns, name in [("prod", "a1"), ("prod", "b1"), ("dev", "a2")]:
        res = one(NP)
        res.metadata.namespace, res.metadata.name = ns, name
        client.create(res)
    assert [r.metadata.name for r in client.list("NetworkPolicy").items] == ["a2", "a1", "b1"]
    assert [r.metadata.name for r in client.list("networkpolicy", "prod").items] == ["a1", "b1"]
    assert [r.metadata.name for r in client.list("NetworkPolicy", "prod", "b").items] == ["b1"]
    assert [r.metadata.name for r in client.list("NetworkPolicy", None, "a").items] == ["a2", "a1"]


def test_namespace_required_for_namespaced_kind(client: Client) -> None:
    res = one(NP.replace("namespace: prod", "labels: {}"))
    with pytest.raises(InvalidValueError, match="namespace is required"):
        client.create(res)


def test_pool_overlap_rejected(client: Client) -> None:
    client.create(one(POOL % ("p1", "10.1.0.0/16")))
    with pytest.raises(InvalidValueError, match=r"IPPool\(p2\) CIDR 10.1.2.0/24 overlaps"):
        client.create(one(POOL % ("p2", "10.1.2.0/24")))
    client.create(one(POOL % ("p3", "10.2.0.0/16")))
    client.create(one(POOL % ("p6", "fd00::/64")))
    client.apply(one(POOL % ("p1", "10.1.0.0/16")))  # itself is not an overlap


def test_policy_tier_must_exist_and_tier_with_policies_kept(client: Client) -> None:
    tiered = NP.replace("name: allow-web", "name: security.allow-web").replace(
        "spec:\n", "spec:\n  tier: security\n"
    )
    with pytest.raises(InvalidValueError, match='tier "security", which does not exist'):
        client.create(one(tiered))
    client.create(
        one(
            "apiVersion: projectcalico.org/v3\nkind: Tier\nmetadata: {name: security}\n"
            "spec: {order: 100}\n"
        )
    )
    client.create(one(tiered))
    with pytest.raises(
        OperationNotSupportedError,
        match=r"^operation delete is not supported on security: Cannot delete a non-empty tier$",
    ):
        client.delete("Tier", "security")
    client.delete("NetworkPolicy", "security.allow-web", "prod")
    client.delete("Tier", "security")


def test_ensure_initialized_idempotent(client: Client) -> None:
    first = client.ensure_initialized("v3.31.0")
    spec = first.spec  # type: ignore[attr-defined]
    assert spec.datastore_ready is True
    assert spec.calico_version == "v3.31.0"
    assert len(spec.cluster_guid) == 32
    again = client.ensure_initialized("v3.31.0")
    assert again.spec.cluster_guid == spec.cluster_guid  # type: ignore[attr-defined]
    tiers = {t.metadata.name: t.spec for t in client.list("Tier").items}  # type: ignore[attr-defined]
    assert {n: (s.order, s.default_action) for n, s in tiers.items()} == {
        "default": (1_000_000, "Deny"),
        "kube-admin": (1_000, "Pass"),
        "kube-baseline": (10_000_000, "Pass"),
    }


def test_ensure_initialized_adds_missing_built_in_tiers_only(client: Client) -> None:
    client.ensure_initialized("v3.31.0")
    # The client refuses to delete a built-in tier: remove it underneath, as a wiped
    # or pre-kube-admin datastore would lack it.
    client.backend.delete(resource_path("Tier", "kube-admin"))
    baseline = client.get("Tier", "kube-baseline")
    client.update(
        baseline.model_copy(
            update={"metadata": baseline.metadata.model_copy(update={"labels": {"mine": "yes"}})}
        )
    )
    client.ensure_initialized("v3.31.0")
    assert client.get("Tier", "kube-admin").spec.default_action == "Pass"  # type: ignore[attr-defined]
    # An existing tier is left as it is (upstream only creates the missing ones).
    assert client.get("Tier", "kube-baseline").metadata.labels == {"mine": "yes"}


def test_ensure_initialized_keeps_locked_datastore(client: Client) -> None:
    cinfo = client.ensure_initialized("v3.31.0")
    cinfo.spec.datastore_ready = False  # type: ignore[attr-defined]
    client.update(cinfo)
    assert client.ensure_initialized("v3.31.0").spec.datastore_ready is False  # type: ignore[attr-defined]


def test_watch_typed_events(client: Client) -> None:
    listed = client.list("IPPool")
    events = client.watch("IPPool", revision=listed.revision)
    client.create(one(POOL % ("p1", "10.1.0.0/16")))
    client.delete("IPPool", "p1")
    first = next(events)
    second = next(events)
    assert first.type is EventType.ADDED and first.resource is not None
    assert first.resource.metadata.name == "p1"
    assert second.type is EventType.DELETED
    events.close()


def test_new_local_datastore_is_initialised_on_open(tmp_path) -> None:
    import calico
    from calico.datastore.config import DatastoreConfig
    from calico.datastore.factory import open_backend

    path = tmp_path / "fresh.db"
    backend = open_backend(DatastoreConfig(datastore_type="local", local_path=str(path)))
    try:
        cinfo = Client(backend).get("ClusterInformation", "default")
        assert cinfo.spec.datastore_ready is True  # type: ignore[attr-defined]
        assert cinfo.spec.calico_version == calico.__version__  # type: ignore[attr-defined]
        guid = cinfo.spec.cluster_guid  # type: ignore[attr-defined]
        # A file initialised before the kube-* tiers existed gets them on the next open.
        backend.delete(resource_path("Tier", "kube-baseline"))
    finally:
        backend.close()
    again = open_backend(DatastoreConfig(datastore_type="local", local_path=str(path)))
    try:
        assert Client(again).get("ClusterInformation", "default").spec.cluster_guid == guid  # type: ignore[attr-defined]
        assert Client(again).get("Tier", "kube-baseline").spec.order == 10_000_000  # type: ignore[attr-defined]
    finally:
        again.close()


@pytest.mark.parametrize("name", ["default", "kube-admin", "kube-baseline"])
def test_built_in_tiers_are_never_deleted(client: Client, name: str) -> None:
    # Refused whether or not the tier exists yet (upstream checks the name first) ...
    with pytest.raises(OperationNotSupportedError) as info:
        client.delete("Tier", name)
    assert str(info.value) == (
        f"operation Delete is not supported on {name}: Cannot delete {name} tier"
    )
    client.ensure_initialized("v3.31.0")
    stored = client.get("Tier", name)
    # ... and once it does, at any revision, it stays.
    with pytest.raises(OperationNotSupportedError):
        client.delete("Tier", name, resource_version=stored.metadata.resource_version)
    assert client.get("Tier", name).metadata.resource_version == stored.metadata.resource_version
    # Its pinned fields cannot be changed either.
    changed = stored.model_copy(
        update={"spec": stored.spec.model_copy(update={"order": 1.0})}  # type: ignore[attr-defined]
    )
    with pytest.raises(ResourceValidationError, match=f"spec.order: {name} tier order must be"):
        client.update(changed)
