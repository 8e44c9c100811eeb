"""Per-resource datastore actions with upstream calicoctl's metadata handling.

- create keeps only name, namespace, resourceVersion, labels and annotations from the input:
  everything else in metadata is server-owned.
- update (replace, and apply of an existing resource) keeps the stored metadata and takes the
  input's labels and annotations; a resourceVersion in the input makes it a compare-and-swap with
  upstream's "out of date" conflict, otherwise it retries on concurrent modification.
- apply never touches ClusterInformation: it is owned by calico/node.
"""

from __future__ import annotations

import time

from calico.api import ObjectMeta, Resource
from calico.datastore.client import Client
from calico.datastore.errors import (
    DatastoreError,
    ResourceAlreadyExistsError,
    UpdateConflictError,
)

UPDATE_ATTEMPTS = 5
RETRY_DELAY = 0.2


class OperationNotSupportedError(DatastoreError):
    def __init__(self, operation: str, identifier: str, reason: str) -> None:
        super().__init__(f"operation {operation} is not supported on {identifier}: {reason}")


def describe(res: Resource) -> str:
    ns = f"{res.metadata.namespace}/" if res.NAMESPACED and res.metadata.namespace else ""
    return f"{res.KIND}({ns}{res.metadata.name})"


def _with_metadata(res: Resource, meta: ObjectMeta) -> Resource:
    return res.model_copy(update={"metadata": meta})


def prepare_for_create(res: Resource) -> Resource:
    m = res.metadata
    meta = ObjectMeta(
        name=m.name,
        namespace=m.namespace,
        resource_version=m.resource_version,
        labels=m.labels,
        annotations=m.annotations,
    )
    return _with_metadata(res, meta)


def merge_for_update(stored: Resource, new: Resource) -> Resource:
    meta = stored.metadata.model_copy(
        update={"labels": new.metadata.labels, "annotations": new.metadata.annotations}
    )
    return _with_metadata(new, meta)


def create(client: Client, res: Resource) -> Resource:
    return client.create(prepare_for_create(res))


def update(client: Client, res: Resource) -> Resource:
    m = res.metadata
    wanted = m.resource_version
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
    except ResourceAlreadyExistsError:
        pass
    return update(client, res)


def delete(client: Client, res: Resource) -> Resource:
    m = res.metadata
    return client.delete(type(res), m.name, m.namespace, resource_version=m.resource_version)
