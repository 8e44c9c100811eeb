"""The typed client: v3 resources in and out of any Backend.

Why a layer of its own: backends only know keys, JSON and revisions. Everything that makes the
data *Calico* data lives here, once, for every backend — validation on write, server-set metadata
(``uid``, ``creationTimestamp``, ``resourceVersion``), and the cross-resource rules a single
document cannot check (IP pools must not overlap, a policy's tier must exist, a tier with
policies cannot be deleted, nor can the built-in tiers, as upstream's tier client refuses).

Key layout (as upstream's etcd mode): ``/calico/resources/v3/projectcalico.org/<plural>/
[<namespace>/]<name>``; the stored JSON is the resource's wire form without ``resourceVersion``,
which is always the key's revision.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from calico.api import Resource, kind_class, parse_resource, resource_class, resource_to_wire
from calico.api.policy import BUILT_IN_TIERS
from calico.datastore.backend import Backend, EventType, KVPair
from calico.datastore.errors import (
    DatastoreError,
    InvalidValueError,
    OperationNotSupportedError,
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
    UpdateConflictError,
)
from calico.model.resources import resource_prefix

POLICY_KINDS = frozenset(
    {"NetworkPolicy", "GlobalNetworkPolicy", "StagedNetworkPolicy", "StagedGlobalNetworkPolicy"}
)
DEFAULT_TIER = "default"

KindRef = str | type[Resource]


def _cls(kind: KindRef) -> type[Resource]:
    if isinstance(kind, type):
        return kind
    cls = kind_class(kind) or resource_class(kind)
    if cls is None:
        raise InvalidValueError(f'resource kind "{kind}" is not supported')
    return cls


def resource_path(kind: KindRef, name: str, namespace: str | None = None) -> str:
    cls = _cls(kind)
    if cls.NAMESPACED and not namespace:
        raise InvalidValueError(f"namespace is required for {cls.KIND}({name})")
    return kind_prefix(cls, namespace) + name


def kind_prefix(kind: KindRef, namespace: str | None = None) -> str:
    """Prefix listing every resource of a kind (in one namespace when given)."""
    cls = _cls(kind)
    return resource_prefix(cls.KIND, namespace if cls.NAMESPACED else None)


def _describe(res: Resource) -> str:
    ns = f"{res.metadata.namespace}/" if res.NAMESPACED and res.metadata.namespace else ""
    return f"{res.KIND}({ns}{res.metadata.name})"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class ResourceList:
    items: list[Resource]
    revision: str  # resourceVersion of the list: watch from here


@dataclass(frozen=True)
class ResourceEvent:
    type: EventType
    resource: Resource | None  # the new object; the last known one for DELETED
    revision: str = ""
    error: Exception | None = None


class Client:
    """Create/update/apply/delete/get/list/watch of v3 resources over one Backend."""

    def __init__(self, backend: Backend, now: Callable[[], str] = _now) -> None:
        self.backend = backend
        self._now = now

    # -- encoding ------------------------------------------------------------------------------

    @staticmethod
    def _encode(res: Resource) -> str:
        wire = resource_to_wire(res)
        wire.get("metadata", {}).pop("resourceVersion", None)
        return json.dumps(wire, separators=(",", ":"), sort_keys=True)

    @staticmethod
    def decode(kv: KVPair) -> Resource:
        """A stored KV back into its resource, with resourceVersion = the key's revision."""
        try:
            data = json.loads(kv.value)
        except ValueError as exc:
            raise InvalidValueError(f"stored value at {kv.key} is not JSON: {exc}") from None
        data.setdefault("metadata", {})["resourceVersion"] = str(kv.revision)
        return parse_resource(data, source=kv.key)

    def _validated(self, res: Resource) -> Resource:
        """Full validation of what will be stored (objects built in code skip the loader)."""
        if res.NAMESPACED and not res.metadata.namespace:
            raise InvalidValueError(f"namespace is required for {_describe(res)}")
        if not res.metadata.name:
            raise InvalidValueError(f"{res.KIND}: metadata.name is required")
        return parse_resource(resource_to_wire(res))

    @staticmethod
    def _revision(res: Resource) -> int | None:
        rv = res.metadata.resource_version
        if not rv:
            return None
        try:
            return int(rv)
        except ValueError:
            raise InvalidValueError(
                f"{_describe(res)}: resourceVersion {rv!r} is not valid for this datastore"
            ) from None

    def _with_meta(self, res: Resource, **fields: Any) -> Resource:
        meta = res.metadata.model_copy(update=fields)
        return res.model_copy(update={"metadata": meta})

    # -- cross-resource rules ------------------------------------------------------------------

    def _check_references(self, res: Resource) -> None:
        if res.KIND == "IPPool":
            self._check_pool_overlap(res)
        elif res.KIND in POLICY_KINDS:
            tier = getattr(res.spec, "tier", None) or DEFAULT_TIER  # type: ignore[attr-defined]
            if tier != DEFAULT_TIER:
                try:
                    self.backend.get(resource_path("Tier", tier))
                except ResourceDoesNotExistError:
                    raise InvalidValueError(
                        f'{_describe(res)} is in tier "{tier}", which does not exist; '
                        "create the Tier first"
                    ) from None

    def _check_pool_overlap(self, pool: Resource) -> None:
        mine = ipaddress.ip_network(pool.spec.cidr, strict=False)  # type: ignore[attr-defined]
        for kv in self.backend.list(kind_prefix("IPPool")).kvs:
            other = self.decode(kv)
            if other.metadata.name == pool.metadata.name:
                continue
            theirs = ipaddress.ip_network(other.spec.cidr, strict=False)  # type: ignore[attr-defined]
            if theirs.version == mine.version and mine.overlaps(theirs):
                raise InvalidValueError(
                    f"IPPool({pool.metadata.name}) CIDR {pool.spec.cidr} overlaps with "  # type: ignore[attr-defined]
                    f"IPPool({other.metadata.name}) CIDR {other.spec.cidr}"  # type: ignore[attr-defined]
                )

    def _check_deletable(self, kind: type[Resource], name: str) -> None:
        """Upstream's tier Delete: a policy in any of the four tiered kinds blocks it."""
        if kind.KIND != "Tier":
            return
        for pkind in sorted(POLICY_KINDS):
            for kv in self.backend.list(kind_prefix(pkind)).kvs:
                policy = self.decode(kv)
                if (getattr(policy.spec, "tier", None) or DEFAULT_TIER) == name:  # type: ignore[attr-defined]
                    raise OperationNotSupportedError(
                        "delete", name, "Cannot delete a non-empty tier"
                    )

    # -- operations ----------------------------------------------------------------------------

    def create(self, res: Resource, *, unsafe: bool = False) -> Resource:
        """Store a new resource. Raises ResourceAlreadyExistsError (key named in the message).

        ``unsafe`` skips the cross-resource rules (upstream's UnsafeCreate): ``ipam split``
        creates pools that overlap the one they replace.
        """
        if res.metadata.resource_version:
            raise InvalidValueError(
                f"{_describe(res)}: metadata.resourceVersion must not be set on create"
            )
        res = self._validated(res)
        if not unsafe:
            self._check_references(res)
        res = self._with_meta(
            res,
            uid=res.metadata.uid or str(uuid.uuid4()),
            creation_timestamp=res.metadata.creation_timestamp or self._now(),
        )
        path = resource_path(type(res), res.metadata.name, res.metadata.namespace)
        try:
            kv = self.backend.create(path, self._encode(res))
        except ResourceAlreadyExistsError:
            raise ResourceAlreadyExistsError(_describe(res)) from None
        return self._with_meta(res, resource_version=str(kv.revision))

    def update(self, res: Resource) -> Resource:
        """Replace an existing resource; compare-and-swap when resourceVersion is set.

        uid and creationTimestamp are kept from the stored object (they are server-owned).
        """
        res = self._validated(res)
        path = resource_path(type(res), res.metadata.name, res.metadata.namespace)
        try:
            current = self.backend.get(path)
        except ResourceDoesNotExistError:
            raise ResourceDoesNotExistError(_describe(res)) from None
        expected = self._revision(res)
        if expected is not None and expected != current.revision:
            raise UpdateConflictError(
                _describe(res),
                f"resourceVersion {expected} does not match the stored {current.revision}",
            )
        stored = self.decode(current)
        if res.metadata.uid and stored.metadata.uid and res.metadata.uid != stored.metadata.uid:
            raise UpdateConflictError(_describe(res), "uid does not match the stored resource")
        self._check_references(res)
        res = self._with_meta(
            res,
            uid=stored.metadata.uid,
            creation_timestamp=stored.metadata.creation_timestamp,
        )
        try:
            kv = self.backend.update(path, self._encode(res), current.revision)
        except UpdateConflictError:
            raise UpdateConflictError(_describe(res), "modified concurrently") from None
        except ResourceDoesNotExistError:
            raise ResourceDoesNotExistError(_describe(res)) from None
        return self._with_meta(res, resource_version=str(kv.revision))

    def apply(self, res: Resource) -> Resource:
        """Create, or update ignoring any resourceVersion (calicoctl apply)."""
        for _ in range(5):
            try:
                return self.create(self._with_meta(res, resource_version=None))
            except ResourceAlreadyExistsError:
                pass
            try:
                return self.update(self._with_meta(res, resource_version=None))
            except ResourceDoesNotExistError:
                continue  # deleted between the two calls: try creating again
        raise DatastoreError(f"{_describe(res)}: apply kept racing with concurrent writers")

    def get(self, kind: KindRef, name: str, namespace: str | None = None) -> Resource:
        cls = _cls(kind)
        path = resource_path(cls, name, namespace)
        try:
            return self.decode(self.backend.get(path))
        except ResourceDoesNotExistError:
            ns = f"{namespace}/" if cls.NAMESPACED and namespace else ""
            raise ResourceDoesNotExistError(f"{cls.KIND}({ns}{name})") from None

    def list(
        self, kind: KindRef, namespace: str | None = None, name_prefix: str = ""
    ) -> ResourceList:
        """Every resource of ``kind`` (all namespaces when ``namespace`` is None)."""
        cls = _cls(kind)
        prefix = kind_prefix(cls, namespace)
        if name_prefix and (namespace or not cls.NAMESPACED):
            listed = self.backend.list(prefix + name_prefix)
            kvs = listed.kvs
        else:
            listed = self.backend.list(prefix)
            kvs = [kv for kv in listed.kvs if kv.key.rsplit("/", 1)[-1].startswith(name_prefix)]
        return ResourceList([self.decode(kv) for kv in kvs], str(listed.revision))

    def delete(
        self,
        kind: KindRef,
        name: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        uid: str | None = None,
    ) -> Resource:
        """Delete and return the last stored object; optionally only at a revision or UID."""
        cls = _cls(kind)
        if cls.KIND == "Tier" and name in BUILT_IN_TIERS:
            # Checked before the tier is even read, as upstream: it does not matter whether
            # it exists (ensure_initialized recreates it anyway).
            raise OperationNotSupportedError("Delete", name, f"Cannot delete {name} tier")
        path = resource_path(cls, name, namespace)
        ns = f"{namespace}/" if cls.NAMESPACED and namespace else ""
        desc = f"{cls.KIND}({ns}{name})"
        try:
            current = self.backend.get(path)
        except ResourceDoesNotExistError:
            raise ResourceDoesNotExistError(desc) from None
        stored = self.decode(current)
        if resource_version and resource_version != str(current.revision):
            raise UpdateConflictError(
                desc,
                f"resourceVersion {resource_version} does not match the stored {current.revision}",
            )
        if uid and stored.metadata.uid != uid:
            raise UpdateConflictError(desc, "uid does not match the stored resource")
        self._check_deletable(cls, name)
        try:
            self.backend.delete(path, current.revision)
        except ResourceDoesNotExistError:
            raise ResourceDoesNotExistError(desc) from None
        except UpdateConflictError:
            raise UpdateConflictError(desc, "modified concurrently") from None
        return stored

    def watch(
        self, kind: KindRef, namespace: str | None = None, revision: str = "0"
    ) -> Iterator[ResourceEvent]:
        """Typed events after ``revision``; ends after an ERROR event (caller relists)."""
        cls = _cls(kind)
        watch = self.backend.watch(kind_prefix(cls, namespace), int(revision or 0))
        try:
            for event in watch:
                if event.type is EventType.ERROR:
                    yield ResourceEvent(EventType.ERROR, None, str(event.revision), event.error)
                    return
                if event.type is EventType.BOOKMARK:
                    continue
                raw = event.value if event.type is not EventType.DELETED else event.prev_value
                res = None
                if raw is not None:
                    res = self.decode(KVPair(event.key, raw, event.revision))
                yield ResourceEvent(event.type, res, str(event.revision))
        finally:
            watch.stop()

    # -- initialisation ------------------------------------------------------------------------

    def ensure_initialized(self, calico_version: str, cluster_type: str = "") -> Resource:
        """Make a fresh datastore usable, as upstream's EnsureInitialized does.

        Creates ClusterInformation ``default`` (fresh clusterGUID, calicoVersion,
        datastoreReady true) and each missing built-in Tier (``default`` Deny, ``kube-admin``
        and ``kube-baseline`` Pass, at fixed orders: ``calico.api.policy.BUILT_IN_TIERS``); an
        existing ClusterInformation keeps its GUID and ready flag (``calicoctl datastore
        migrate lock`` may have cleared it on purpose). Idempotent and safe to race.
        """
        cinfo_cls = _cls("ClusterInformation")
        for _ in range(5):
            try:
                current = self.get(cinfo_cls, "default")
            except ResourceDoesNotExistError:
                fresh = cinfo_cls.model_validate(
                    {
                        "metadata": {"name": "default"},
                        "spec": {
                            "clusterGUID": uuid.uuid4().hex,
                            "calicoVersion": calico_version,
                            "datastoreReady": True,
                            **({"clusterType": cluster_type} if cluster_type else {}),
                        },
                    }
                )
                try:
                    current = self.create(fresh)
                except ResourceAlreadyExistsError:
                    continue
            spec = current.spec  # type: ignore[attr-defined]
            if not spec.cluster_guid or spec.datastore_ready is None:
                patched = spec.model_copy(
                    update={
                        "cluster_guid": spec.cluster_guid or uuid.uuid4().hex,
                        "datastore_ready": (
                            True if spec.datastore_ready is None else spec.datastore_ready
                        ),
                        "calico_version": spec.calico_version or calico_version,
                    }
                )
                try:
                    current = self.update(current.model_copy(update={"spec": patched}))
                except (UpdateConflictError, ResourceDoesNotExistError):
                    continue
            break
        else:
            raise DatastoreError("could not initialise ClusterInformation: too much contention")
        tier_cls = _cls("Tier")
        for name, (order, action) in BUILT_IN_TIERS.items():
            with contextlib.suppress(ResourceAlreadyExistsError):
                self.create(
                    tier_cls.model_validate(
                        {
                            "metadata": {"name": name},
                            "spec": {"order": order, "defaultAction": action},
                        }
                    )
                )
        return current
