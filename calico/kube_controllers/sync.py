"""The etcd-mode copy controllers (design/kube-controllers.md "etcd-mode controllers").

On the Kubernetes datastore the backend synthesises profiles, policies and endpoint labels
from Kubernetes objects; with Calico data in etcd, kube-controllers writes them. The
conversions are the Kubernetes datastore's own (``calico.datastore.kubernetes.native``):
the controllers read them from the Kubernetes view (calico.kube_controllers.kubecache) and
make the Calico store match:

- namespace: Namespaces -> ``kns.<ns>`` Profiles; stale ``kns.`` profiles deleted;
- serviceaccount: ServiceAccounts -> ``ksa.<ns>.<sa>`` Profiles; stale ones deleted;
- policy: NetworkPolicies -> Calico NetworkPolicies ``knp.default.<name>`` (order 1000, tier
  default); stale ``knp.default.`` policies deleted;
- workloadendpoint: a pod's labels, service account and profiles -> its existing
  WorkloadEndpoints (never created or deleted: the CNI plugin owns them).

Each reconcile is a full diff of desired against stored, so any start state converges and a
second run writes nothing. Nothing is deleted while the Kubernetes view is not in sync.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from calico.api import parse_resource
from calico.datastore import Backend
from calico.datastore.client import Client
from calico.datastore.errors import (
    DatastoreError,
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
    UpdateConflictError,
)
from calico.kube_controllers.kubecache import KubeCache
from calico.kube_controllers.writes import cas_write_all
from calico.model.resources import resource_prefix

log = logging.getLogger(__name__)

KNP_PREFIX = "knp.default."
_SOFT = (UpdateConflictError, ResourceDoesNotExistError, ResourceAlreadyExistsError)


def _essence(obj: dict[str, Any]) -> tuple[Any, Any, Any]:
    meta = obj.get("metadata") or {}
    return (meta.get("labels") or None, meta.get("annotations") or None, obj.get("spec") or {})


def _dump(res: Any) -> dict[str, Any]:
    return res.model_dump(by_alias=True, exclude_none=True, mode="json")


class MirrorController:
    """Make the stored ``kind`` objects whose name starts with ``prefix`` equal ``desired()``."""

    def __init__(self, name: str, calico: Client, kube: KubeCache, kind: str, prefix: str) -> None:
        self.name, self.calico, self.kube, self.kind, self.prefix = name, calico, kube, kind, prefix

    def desired(self) -> dict[tuple[str, str], dict[str, Any]]:
        raise NotImplementedError

    def reconcile(self) -> int:
        """One diff-and-write pass; returns the number of writes."""
        if not self.kube.in_sync:
            return 0
        want = self.desired()
        have: dict[tuple[str, str], Any] = {}
        for res in self.calico.list(self.kind).items:
            if res.metadata.name.startswith(self.prefix):
                have[(res.metadata.namespace or "", res.metadata.name)] = res
        writes = 0
        for ident in have:
            if ident not in want:
                log.info("%s controller: deleting stale %s %s", self.name, self.kind, ident)
                writes += self._write(self.calico.delete, self.kind, ident[1], ident[0] or None)
        for ident, obj in want.items():
            res = parse_resource(obj)
            current = have.get(ident)
            if current is None:
                writes += self._write(self.calico.create, res)
            elif _essence(_dump(current)) != _essence(_dump(res)):
                res.metadata.resource_version = current.metadata.resource_version
                writes += self._write(self.calico.update, res)
        return writes

    def _write(self, op: Any, *args: Any) -> int:
        try:
            op(*args)
            return 1
        except _SOFT as exc:  # raced with another writer: the next pass settles it
            log.info("%s controller: %s", self.name, exc)
        except DatastoreError as exc:
            log.warning("%s controller: write failed: %s", self.name, exc)
        return 0


def _clean(obj: dict[str, Any], name: str, namespace: str = "") -> dict[str, Any]:
    """Only what kube-controllers owns: name, namespace, labels, annotations and spec."""
    meta = obj.get("metadata") or {}
    out_meta: dict[str, Any] = {"name": name}
    if namespace:
        out_meta["namespace"] = namespace
    for field in ("labels", "annotations"):
        if meta.get(field):
            out_meta[field] = meta[field]
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": obj.get("kind"),
        "metadata": out_meta,
        "spec": obj.get("spec") or {},
    }


class ProfileController(MirrorController):
    """namespace (``kns.``) or serviceaccount (``ksa.``) profiles."""

    def __init__(self, name: str, calico: Client, kube: KubeCache, prefix: str) -> None:
        super().__init__(name, calico, kube, "Profile", prefix)

    def desired(self) -> dict[tuple[str, str], dict[str, Any]]:
        return {
            ("", name): _clean(obj, name)
            for (_, name), obj in self.kube.snapshot("Profile").items()
            if name.startswith(self.prefix)
        }


class PolicyController(MirrorController):
    def __init__(self, calico: Client, kube: KubeCache) -> None:
        super().__init__("policy", calico, kube, "NetworkPolicy", KNP_PREFIX)

    def desired(self) -> dict[tuple[str, str], dict[str, Any]]:
        return {
            (ns, KNP_PREFIX + name): _clean(obj, KNP_PREFIX + name, ns)
            for (ns, name), obj in self.kube.snapshot("KubernetesNetworkPolicy").items()
        }


_WEP_FIELDS = ("serviceAccountName", "profiles")


class PodController:
    """Pod labels, service account and profiles onto the stored WorkloadEndpoints.

    Works on the stored JSON (no model round trip: 50,000 endpoints per resync) and writes
    with compare-and-swap on the revision it read; a conflict is left to the next pass.
    """

    name = "workloadendpoint"

    def __init__(self, backend: Backend, kube: KubeCache) -> None:
        self.backend, self.kube = backend, kube

    def reconcile(self) -> int:
        if not self.kube.in_sync:
            return 0
        pods: dict[tuple[str, str], dict[str, Any]] = {}
        for (ns, _), view in self.kube.snapshot("WorkloadEndpoint").items():
            pods[(ns, view.get("spec", {}).get("pod", ""))] = view
        jobs: list[tuple[str, str, int]] = []
        for kv in self.backend.list(resource_prefix("WorkloadEndpoint")).kvs:
            wep = json.loads(kv.value)
            spec, meta = wep.get("spec") or {}, wep.get("metadata") or {}
            if spec.get("orchestrator") != "k8s":
                continue
            view = pods.get((meta.get("namespace", ""), spec.get("pod", "")))
            if view is None:
                continue
            changed = False
            labels = view["metadata"].get("labels") or {}
            if (meta.get("labels") or {}) != labels:
                meta["labels"] = labels
                changed = True
            for field in _WEP_FIELDS:
                value = view["spec"].get(field)
                if spec.get(field) != value:
                    if value is None:
                        spec.pop(field, None)
                    else:
                        spec[field] = value
                    changed = True
            if changed:
                wep["metadata"], wep["spec"] = meta, spec
                jobs.append((kv.key, json.dumps(wep, sort_keys=True), kv.revision))
        return cas_write_all(self.backend, jobs, "workloadendpoint controller")
