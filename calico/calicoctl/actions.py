"""Per-resource datastore actions with upstream calicoctl's metadata handling.

- create keeps only name, namespace, resourceVersion, labels and annotations from the input:
  everything else in metadata is server-owned.
- update (replace, and apply of an existing resource) keeps the stored metadata and takes the
  input's labels and annotations; a resourceVersion in the input makes it a compare-and-swap with
  upstream's "out of date" conflict, otherwise it retries on concurrent modification.
- apply never touches ClusterInformation: it is owned by calico/node; create, replace and
  delete of it are "not supported", as upstream's resource manager says.
- policies are written with the ``projectcalico.org/tier: <tier>`` label, as upstream's
  client adds it; NetworkPolicies named ``knp.default.*`` are refused (that prefix is how
  Kubernetes NetworkPolicies are stored alongside Calico ones).
"""

from __future__ import annotations

import time

from calico.api import ObjectMeta, Resource
from calico.datastore.client import Client
from calico.datastore.errors import (
    DatastoreError,
    OperationNotSupportedError,
    ResourceAlreadyExistsError,
    UpdateConflictError,
)

UPDATE_ATTEMPTS = 5
RETRY_DELAY = 0.2


TIER_LABEL = "projectcalico.org/tier"
TIERED_KINDS = frozenset(
    {
        "NetworkPolicy",
        "GlobalNetworkPolicy",
        "StagedNetworkPolicy",
        "StagedGlobalNetworkPolicy",
    }
)
KNP_PREFIX = "knp.default."
KNP_REASON = "kubernetes network policies must be managed through the kubernetes API"


def describe(res: Resource) -> str:
    ns = f"{res.metadata.namespace}/" if res.NAMESPACED and res.metadata.namespace else ""
    return f"{res.KIND}({ns}{res.metadata.name})"


def _refusal(operation: str, res: Resource) -> OperationNotSupportedError | None:
    """Upstream's resource-manager refusal of this operation on this resource, if any."""
    if res.KIND == "ClusterInformation":
        return OperationNotSupportedError(operation, "ClusterInformation")
    if res.KIND == "NetworkPolicy" and res.metadata.name.startswith(KNP_PREFIX):
        return OperationNotSupportedError(operation, describe(res), KNP_REASON)
    return None


def _refuse(operation: str, res: Resource) -> None:
    if refusal := _refusal(operation, res):
        raise refusal


def _with_metadata(res: Resource, meta: ObjectMeta) -> Resource:
    return res.model_copy(update={"metadata": meta})


def _labels(res: Resource, labels: dict[str, str] | None) -> dict[str, str] | None:
    """``labels`` plus the tier label policies carry."""
    if res.KIND not in TIERED_KINDS:
        return labels
    tier = getattr(res.spec, "tier", None) or "default"  # type: ignore[attr-defined]
    return {**(labels or {}), TIER_LABEL: tier}


def with_tier_label(res: Resource) -> Resource:
    """``res`` as every write stores it (patch and label too): policies keep the tier label."""
    if res.KIND not in TIERED_KINDS:
        return res
    meta = res.metadata.model_copy(update={"labels": _labels(res, res.metadata.labels)})
    return _with_metadata(res, meta)


def prepare_for_create(res: Resource) -> Resource:
    m = res.metadata
    meta = ObjectMeta(
        name=m.name,
        namespace=m.namespace,
        resource_version=m.resource_version,
        labels=_labels(res, m.labels),
        annotations=m.annotations,
    )
    return _with_metadata(res, meta)


def merge_for_update(stored: Resource, new: Resource) -> Resource:
    meta = stored.metadata.model_copy(
        update={
            "labels": _labels(new, new.metadata.labels),
            "annotations": new.metadata.annotations,
        }
    )
    return _with_metadata(new, meta)


def create(client: Client, res: Resource) -> Resource:
    _refuse("create or apply", res)
    return client.create(prepare_for_create(res))


def update(client: Client, res: Resource) -> Resource:
    m = res.metadata
    wanted = m.resource_version
    if refusal := _refusal("apply or replace", res):
        client.get(type(res), m.name, m.namespace)  # upstream reads first: not-found wins
        raise refusal
    if wanted:
        stored = client.get(type(res), m.name, m.namespace)
        latest = stored.metadata.resource_version
        if wanted != latest:
            raise UpdateConflictError(
                describe(stored),
                f"Resource version '{wanted}' is out of date (latest: {latest}). "
                "Update the resource YAML/JSON in order to make changes.",
            )
        return client.update(merge_for_update(stored, res))
    last: Exception | None = None
    for _ in range(UPDATE_ATTEMPTS):
        stored = client.get(type(res), m.name, m.namespace)
        try:
            return client.update(merge_for_update(stored, res))
        except UpdateConflictError as exc:
            last = exc
            time.sleep(RETRY_DELAY)
    raise DatastoreError(f"failed to update the resource: {last}")


def apply(client: Client, res: Resource) -> Resource:
    if res.KIND == "ClusterInformation":
        raise OperationNotSupportedError("apply", "ClusterInformation", "resource is readonly")
    without_rv = _with_metadata(res, res.metadata.model_copy(update={"resource_version": None}))
    try:
        return create(client, without_rv)
    except (ResourceAlreadyExistsError, OperationNotSupportedError):
        pass  # upstream falls back to an update for both
    return update(client, res)


def delete(client: Client, res: Resource) -> Resource:
    _refuse("delete", res)
    m = res.metadata
    return client.delete(type(res), m.name, m.namespace, resource_version=m.resource_version)
