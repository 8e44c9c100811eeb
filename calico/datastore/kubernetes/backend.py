"""KubernetesBackend: the Backend protocol over the Kubernetes API.

Keys stay the v3 paths every other backend uses (``/calico/resources/v3/projectcalico.org/
<plural>/[<ns>/]<name>``) so the typed client, the syncers and the conformance suite run
unchanged; each plural maps to one Kubernetes collection: a Calico custom resource (``crd.py``)
here, native objects in ``native``. Values are the v3 objects as JSON (sorted keys, no
resourceVersion: that is the KV revision = the object's resourceVersion, which the API server
keeps global and increasing).
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any

from calico.datastore.backend import EventType, KVPair, ListResult, WatchEvent
from calico.datastore.config import DatastoreConfig
from calico.datastore.errors import (
    DatastoreError,
    InvalidValueError,
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
    UpdateConflictError,
)
from calico.datastore.kubernetes import crd, ipam_v1
from calico.datastore.kubernetes.errors import KubeAPIError, translate
from calico.datastore.kubernetes.kubeconfig import api_group, client_configuration
from calico.datastore.kubernetes.native.kinds import (
    NativeKind,
    native_kinds,
)
from calico.datastore.kubernetes.rest import Rest
from calico.datastore.kubernetes.watch import KubeWatch
from calico.model.resources import RESOURCE_PREFIX

log = logging.getLogger(__name__)

PAGE = 500
LIST_ATTEMPTS = 5  # snapshot lists retried when their resourceVersion is compacted meanwhile


class _SnapshotExpired(Exception):
    """An exact list's resourceVersion was compacted: the snapshot must start again."""


def _dump(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


def discover_mode(rest: Rest) -> str:
    """v3 iff ``projectcalico.org`` is served and ``crd.projectcalico.org`` is not (an
    aggregated Calico API server over v1 CRDs serves both); errors -> v1."""
    try:
        groups = {g.get("name") for g in rest.request("GET", "/apis").get("groups", [])}
    except DatastoreError as exc:
        log.info("API discovery failed, using crd.projectcalico.org/v1: %s", exc)
        return crd.V1
    if "projectcalico.org" in groups and "crd.projectcalico.org" not in groups:
        return crd.V3
    return crd.V1


class KubernetesBackend:
    """``DATASTORE_TYPE=kubernetes``. Thread-safe (the client's pool is)."""

    datastore_type = "kubernetes"  # the syncers add the Kubernetes-only kinds for it

    def __init__(self, config: DatastoreConfig, mode: str | None = None) -> None:
        self.config = config
        self.rest = Rest(client_configuration(config))
        self.mode = mode or api_group(config) or discover_mode(self.rest)
        self.kinds = crd.crd_kinds_by_plural(self.mode)
        self.group, self.version = crd.GROUPS[self.mode]
        # The CNI plugin's mode: WorkloadEndpoint writes become pod-annotation patches.
        extra = dict(config.extra)
        self.native = native_kinds(
            self.rest, bool(extra.get("cniPatchMode")), extra.get("usePodCIDR") is True
        )
        self._plurals = {ck.kind: plural for plural, ck in self.kinds.items()}

    # -- routing ---------------------------------------------------------------------------

    def _route(self, key: str) -> tuple[crd.CrdKind, str, str]:
        """(kind, namespace, name) of a resource key; anything else is unsupported here."""
        if key.startswith(RESOURCE_PREFIX):
            parts = key[len(RESOURCE_PREFIX) :].split("/")
            ck = self.kinds.get(parts[0])
            if ck is not None:
                if ck.namespaced and len(parts) == 3 and parts[1] and parts[2]:
                    return ck, parts[1], parts[2]
                if not ck.namespaced and len(parts) == 2 and parts[1]:
                    return ck, "", parts[1]
        raise InvalidValueError(f"key {key} is not supported by the Kubernetes datastore")

    def _native(self, key: str) -> tuple[NativeKind, str, str] | None:
        if not key.startswith(RESOURCE_PREFIX):
            return None
        parts = key[len(RESOURCE_PREFIX) :].split("/")
        nk = self.native.get(parts[0])
        if nk is None:
            return None
        if nk.namespaced and len(parts) == 3 and parts[1] and parts[2]:
            return nk, parts[1], parts[2]
        if not nk.namespaced and len(parts) == 2 and parts[1]:
            return nk, "", parts[1]
        raise InvalidValueError(f"key {key} is not supported by the Kubernetes datastore")

    def _collection(self, ck: crd.CrdKind, namespace: str = "") -> str:
        ns = f"namespaces/{namespace}/" if ck.namespaced and namespace else ""
        return f"/apis/{self.group}/{self.version}/{ns}{ck.plural}"

    def _item(self, ck: crd.CrdKind, namespace: str, name: str) -> str:
        return f"{self._collection(ck, namespace)}/{name}"

    def _key(self, ck: crd.CrdKind, cr: dict[str, Any]) -> str:
        meta = cr.get("metadata") or {}
        ns = f"{meta.get('namespace', '')}/" if ck.namespaced else ""
        return f"{RESOURCE_PREFIX}{self._plurals[ck.kind]}/{ns}{meta.get('name', '')}"

    def _kv(self, ck: crd.CrdKind, cr: dict[str, Any]) -> KVPair:
        rv = (cr.get("metadata") or {}).get("resourceVersion", "0")
        return KVPair(self._key(ck, cr), _dump(crd.from_cr(ck, self.mode, cr)), int(rv))

    def _call(self, key: str, method: str, path: str, **kw: Any) -> dict[str, Any]:
        try:
            return self.rest.request(method, path, **kw)
        except KubeAPIError as exc:
            raise translate(exc, key) from None

    @staticmethod
    def _value(key: str, value: str) -> dict[str, Any]:
        try:
            obj = json.loads(value)
        except ValueError as exc:
            raise InvalidValueError(f"value for {key} is not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise InvalidValueError(f"value for {key} is not a resource object")
        return obj

    @staticmethod
    def _no_ttl(ttl: float | None) -> None:
        if ttl is not None:
            raise InvalidValueError("the Kubernetes datastore does not support TTLs")

    # -- writes ----------------------------------------------------------------------------

    def create(self, key: str, value: str, ttl: float | None = None) -> KVPair:
        self._no_ttl(ttl)
        if key.startswith(ipam_v1.PREFIX):  # an etcd export's raw IPAM key (migrate import)
            kind, name, spec = ipam_v1.to_v3(key, value)
            ck = crd.crd_kind(kind, self.mode)
            assert ck is not None
            body = crd.to_cr(ck, self.mode, name, "", {"metadata": {}, "spec": spec}, None)
            self._kv(ck, self._call(key, "POST", self._collection(ck), body=body))
            return KVPair(
                key,
                value,
                int(
                    self._call(key, "GET", self._item(ck, "", name))["metadata"]["resourceVersion"]
                ),
            )
        if native := self._native(key):
            return native[0].create(native[1], native[2], self._value(key, value))
        ck, ns, name = self._route(key)
        body = crd.to_cr(ck, self.mode, name, ns, self._value(key, value), None)
        return self._kv(ck, self._call(key, "POST", self._collection(ck, ns), body=body))

    def update(self, key: str, value: str, revision: int, ttl: float | None = None) -> KVPair:
        self._no_ttl(ttl)
        if native := self._native(key):
            nk, ns, name = native
            return nk.update(ns, name, self._value(key, value), revision)
        ck, ns, name = self._route(key)
        obj = self._value(key, value)
        body = crd.to_cr(ck, self.mode, name, ns, obj, revision)
        out = self._call(key, "PUT", self._item(ck, ns, name), body=body)
        if ck.has_status and "status" in obj and out.get("status") != body.get("status"):
            body["metadata"]["resourceVersion"] = out["metadata"]["resourceVersion"]
            out = self._call(key, "PUT", self._item(ck, ns, name) + "/status", body=body)
        return self._kv(ck, out)

    def apply(self, key: str, value: str, ttl: float | None = None) -> KVPair:
        if native := self._native(key):  # no create: apply of an existing object updates
            nk, ns, name = native
            return nk.update(ns, name, self._value(key, value), nk.get(ns, name).revision)
        for _ in range(10):
            try:
                return self.create(key, value, ttl)
            except ResourceAlreadyExistsError:
                pass
            try:
                current = self.get(key)
                return self.update(key, value, current.revision, ttl)
            except (ResourceDoesNotExistError, UpdateConflictError):
                continue
        raise DatastoreError(f"apply of {key} kept racing with concurrent writers")

    def delete(self, key: str, revision: int | None = None) -> KVPair:
        """GET, then DELETE with a uid precondition (plus the revision, when given).

        IPAM kinds soft-delete first, as upstream: a CAS update setting ``deleted`` is the
        linearisation point, then the DELETE (uid precondition only) removes the object.
        """
        if native := self._native(key):
            return native[0].delete(native[1], native[2], revision)
        ck, ns, name = self._route(key)
        cr = self._call(key, "GET", self._item(ck, ns, name))
        if crd.is_soft_deleted(ck, cr):
            self._finish_delete(key, ck, ns, name, cr)
            raise ResourceDoesNotExistError(key)
        current = self._kv(ck, cr)
        if revision is not None and revision != current.revision:
            raise UpdateConflictError(
                key, f"revision {revision} does not match the stored {current.revision}"
            )
        pre: dict[str, str] = {"uid": cr["metadata"]["uid"]}
        if ck.kind in crd.SOFT_DELETE_KINDS:
            marked = json.loads(json.dumps(cr))
            marked["spec"]["deleted"] = (
                "true" if ck.kind == "BlockAffinity" and self.mode == crd.V1 else True
            )
            self._call(key, "PUT", self._item(ck, ns, name), body=marked)
        elif revision is not None:
            pre["resourceVersion"] = str(revision)
        self._call(
            key,
            "DELETE",
            self._item(ck, ns, name),
            body={"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": pre},
        )
        return current

    def _finish_delete(
        self, key: str, ck: crd.CrdKind, ns: str, name: str, cr: dict[str, Any]
    ) -> None:
        with contextlib.suppress(ResourceDoesNotExistError):
            self._call(
                key,
                "DELETE",
                self._item(ck, ns, name),
                body={"preconditions": {"uid": cr["metadata"]["uid"]}},
            )

    # -- reads -----------------------------------------------------------------------------

    def get(self, key: str) -> KVPair:
        if native := self._native(key):
            return native[0].get(native[1], native[2])
        ck, ns, name = self._route(key)
        cr = self._call(key, "GET", self._item(ck, ns, name))
        if crd.is_soft_deleted(ck, cr):
            self._finish_delete(key, ck, ns, name, cr)
            raise ResourceDoesNotExistError(key)
        return self._kv(ck, cr)

    def _covered(self, prefix: str) -> list[tuple[crd.CrdKind | NativeKind, str]]:
        """The (kind, namespace) collections holding keys that may start with ``prefix``."""
        every: dict[str, crd.CrdKind | NativeKind] = {**self.kinds, **self.native}
        if prefix.startswith(RESOURCE_PREFIX):
            rest = prefix[len(RESOURCE_PREFIX) :]
            plural, slash, tail = rest.partition("/")
            if slash:
                kind = every.get(plural)
                if kind is None:
                    return []
                ns, sep, _ = tail.partition("/")
                return [(kind, ns if kind.namespaced and sep else "")]
            return [(k, "") for p, k in sorted(every.items()) if p.startswith(plural)]
        if RESOURCE_PREFIX.startswith(prefix):
            return [(k, "") for _, k in sorted(every.items())]
        return []

    def _list_path(self, path: str, at: int | None) -> tuple[list[dict[str, Any]], int | None]:
        """One collection, paged; ``at``: exactly that resourceVersion (the snapshot the
        first collection's list fixed). Returns (items, list RV), RV None when not served."""
        items: list[dict[str, Any]] = []
        query: dict[str, Any] = {"limit": PAGE}
        if at is not None:
            query.update(resourceVersion=str(at), resourceVersionMatch="Exact")
        rv: int | None = None
        while True:
            try:
                page = self.rest.request("GET", path, query=query)
            except KubeAPIError as exc:
                if exc.code == 404:  # API / CRD not installed: nothing stored
                    return [], rv
                if exc.code == 410 and at is not None:
                    raise _SnapshotExpired from None
                raise translate(exc, path) from None
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            if rv is None:
                rv = int(meta.get("resourceVersion") or 0)
            cont = meta.get("continue") or ""
            if not cont:
                return items, rv
            query = {"limit": PAGE, "continue": cont}  # the token pins the first page's RV

    def list(self, prefix: str) -> ListResult:
        """Every collection the prefix covers, as one snapshot: the first collection's list
        fixes the resourceVersion R and the others are listed exactly at R
        (``resourceVersionMatch=Exact``), so a watch from R misses nothing in any of them.
        (Taking the newest of independent list RVs lost the earlier collections' writes in
        between: design/datastore-kubernetes.md "Watches".) R compacted meanwhile: again."""
        for _ in range(LIST_ATTEMPTS):
            try:
                return self._list_once(prefix)
            except _SnapshotExpired:
                log.info("Snapshot of %s was compacted while listing; listing again", prefix)
        raise DatastoreError(f"list of {prefix}: the snapshot kept being compacted")

    def _list_once(self, prefix: str) -> ListResult:
        kvs: list[KVPair] = []
        at: int | None = None
        for ck, ns in self._covered(prefix):
            if isinstance(ck, NativeKind):
                if not ns:
                    kvs.extend(kv for kv in ck.extra() if kv.key.startswith(prefix))
                for coll in ck.collections(ns):
                    items, rv = self._list_path(coll.path, at)
                    at = rv if at is None else at
                    for obj in items:
                        try:
                            kvs.extend(
                                kv
                                for kv in coll.convert(obj)
                                if kv.value and kv.key.startswith(prefix)
                            )
                        except DatastoreError as exc:  # upstream skips unconvertible items
                            name = (obj.get("metadata") or {}).get("name")
                            log.warning("Skipping %s: %s", name, exc)
                continue
            items, rv = self._list_path(self._collection(ck, ns), at)
            at = rv if at is None else at
            for cr in items:
                if crd.is_soft_deleted(ck, cr):
                    continue
                try:
                    kv = self._kv(ck, cr)
                except DatastoreError as exc:  # upstream skips unconvertible items
                    log.warning("Skipping %s: %s", (cr.get("metadata") or {}).get("name"), exc)
                    continue
                if kv.key.startswith(prefix):
                    kvs.append(kv)
        kvs.sort(key=lambda kv: kv.key)
        return ListResult(kvs, at or self.current_revision())

    def watch(self, prefix: str, revision: int) -> KubeWatch:
        sources = []
        for kind, ns in self._covered(prefix):
            if isinstance(kind, NativeKind):
                for coll in kind.collections(ns):
                    sources.append((coll.path, {}, _native_converter(coll.convert, prefix)))
            else:
                sources.append((self._collection(kind, ns), {}, self._converter(kind, prefix)))
        return KubeWatch(self.rest, sources, revision)

    def _converter(self, ck: crd.CrdKind, prefix: str) -> Any:
        def convert(typ: str, cr: dict[str, Any]) -> list[WatchEvent]:
            kv = self._kv(ck, cr)
            if not kv.key.startswith(prefix):
                return []
            deleted = crd.is_soft_deleted(ck, cr)
            if typ == "DELETED":
                if deleted:
                    return []  # already reported when the soft delete was written
                return [WatchEvent(EventType.DELETED, kv.key, None, kv.value, kv.revision)]
            if deleted:
                if typ == "ADDED":
                    return []
                return [WatchEvent(EventType.DELETED, kv.key, None, kv.value, kv.revision)]
            etype = EventType.ADDED if typ == "ADDED" else EventType.MODIFIED
            return [WatchEvent(etype, kv.key, kv.value, None, kv.revision)]

        return convert

    def kube_object(self, plural: str, name: str, namespace: str = "") -> dict[str, Any]:
        """A core/v1 object as the API returns it (the CNI plugin reads pod and namespace
        annotations). Raises ResourceDoesNotExistError."""
        ns = f"namespaces/{namespace}/" if namespace else ""
        path = f"/api/v1/{ns}{plural}/{name}"
        return self._call(path, "GET", path)

    def current_revision(self) -> int:
        """The API server's current resourceVersion: that of a one-item namespaces list (the
        core API is always served, and every Calico component may list namespaces)."""
        path = "/api/v1/namespaces"
        try:
            page = self.rest.request("GET", path, query={"limit": 1})
        except KubeAPIError as exc:
            raise translate(exc, path) from None
        return int((page.get("metadata") or {}).get("resourceVersion") or 0)

    def compact(self, revision: int) -> None:
        raise DatastoreError(
            "the Kubernetes datastore cannot compact: the API server's etcd does that"
        )

    def close(self) -> None:
        self.rest.close()


def _native_converter(convert: Any, prefix: str) -> Any:
    """Watch events of a native collection; objects that map to nothing give no event."""

    def conv(typ: str, obj: dict[str, Any]) -> list[WatchEvent]:
        out = []
        for kv in convert(obj):
            if not kv.key.startswith(prefix):
                continue
            if typ == "DELETED" or not kv.value:  # (an empty value is a tombstone)
                prev = kv.value or None
                out.append(WatchEvent(EventType.DELETED, kv.key, None, prev, kv.revision))
            else:
                etype = EventType.ADDED if typ == "ADDED" else EventType.MODIFIED
                out.append(WatchEvent(etype, kv.key, kv.value, None, kv.revision))
        return out

    return conv
