"""Calico v3 resources <-> the custom resources that store them.

Two backing groups: ``crd.projectcalico.org/v1`` (the default) keeps on the CR only the name,
namespace, resourceVersion, the bit-reversed uid and the labels/annotations that are "ours"
(key contains ``projectcalico.org/`` or ``operator.tigera.io/``); everything else of the v3
metadata travels in the ``projectcalico.org/metadata`` annotation and is overlaid on read.
``projectcalico.org/v3`` stores the v3 object as it is. IPAM kinds bypass the metadata
annotation (upstream writes them below clientv3) and BlockAffinity's v1 ``deleted`` is a string.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from calico.api.kind_table import KINDS
from calico.datastore.errors import InvalidValueError
from calico.datastore.kubernetes.names import hostname_hash
from calico.datastore.kubernetes.uids import convert_uid

V1 = "v1"
V3 = "v3"
GROUPS = {V1: ("crd.projectcalico.org", "v1"), V3: ("projectcalico.org", "v3")}
V3_API_VERSION = "projectcalico.org/v3"
METADATA_ANNOTATION = "projectcalico.org/metadata"
POLICY_KINDS = frozenset(
    {"NetworkPolicy", "GlobalNetworkPolicy", "StagedNetworkPolicy", "StagedGlobalNetworkPolicy"}
)
STATUS_KINDS = frozenset({"IPPool", "Tier", "KubeControllersConfiguration", "CalicoNodeStatus"})
IPAM_KINDS = frozenset({"IPAMBlock", "IPAMHandle", "BlockAffinity", "IPAMConfiguration"})
SOFT_DELETE_KINDS = frozenset({"IPAMBlock", "IPAMHandle", "BlockAffinity"})
# Kinds served from native Kubernetes objects, never CRDs.
NATIVE_KINDS = frozenset({"Node", "WorkloadEndpoint", "Profile"})


@dataclass(frozen=True)
class CrdKind:
    kind: str  # v3 kind
    namespaced: bool
    plural: str  # per group (IPAMConfiguration: ipamconfigs vs ipamconfigurations)
    cr_kind: str

    @property
    def has_status(self) -> bool:
        return self.kind in STATUS_KINDS


def crd_kind(kind: str, mode: str) -> CrdKind | None:
    info = KINDS.get(kind)
    if info is None or info.module is None or kind in NATIVE_KINDS:
        return None
    if kind == "IPAMConfiguration" and mode == V1:
        return CrdKind(kind, False, "ipamconfigs", "IPAMConfig")
    return CrdKind(kind, info.namespaced, info.plural, kind)


def crd_kinds_by_plural(mode: str) -> dict[str, CrdKind]:
    """v3 plural (the datastore key's segment) -> CrdKind."""
    out = {}
    for kind, info in KINDS.items():
        if (ck := crd_kind(kind, mode)) is not None:
            out[info.plural] = ck
    return out


def _ours(key: str) -> bool:
    return "projectcalico.org/" in key or "operator.tigera.io/" in key


def _affinity_labels(spec: dict[str, Any]) -> dict[str, str]:
    node = str(spec.get("node", ""))
    return {
        "projectcalico.org/hostname-hash": hostname_hash(node),
        "projectcalico.org/affinity-type": str(spec.get("type") or "host"),
        "projectcalico.org/ip-version": "6" if ":" in str(spec.get("cidr", "")) else "4",
    }


def to_cr(
    ck: CrdKind, mode: str, name: str, namespace: str, value: dict[str, Any], revision: int | None
) -> dict[str, Any]:
    """The CR body for a v3 object (``revision`` becomes metadata.resourceVersion)."""
    group, version = GROUPS[mode]
    meta_in = dict(value.get("metadata") or {})
    meta: dict[str, Any] = {"name": name}
    if ck.namespaced:
        meta["namespace"] = namespace
    if revision is not None:
        meta["resourceVersion"] = str(revision)
    body: dict[str, Any] = {"apiVersion": f"{group}/{version}", "kind": ck.cr_kind}
    spec = copy.deepcopy(value.get("spec"))
    if mode == V3:
        for k, v in meta_in.items():
            if k not in ("name", "namespace", "resourceVersion", "uid", "creationTimestamp"):
                meta[k] = v
        if meta_in.get("uid") and revision is not None:
            meta["uid"] = meta_in["uid"]
    else:
        uid = meta_in.get("uid")
        if uid and revision is not None:
            meta["uid"] = convert_uid(uid)
        if ck.kind in IPAM_KINDS:
            labels = {k: v for k, v in (meta_in.get("labels") or {}).items() if _ours(k)}
            if ck.kind == "BlockAffinity" and isinstance(spec, dict):
                labels.update(_affinity_labels(spec))
                spec["deleted"] = "true" if spec.get("deleted") in (True, "true") else "false"
            if labels:
                meta["labels"] = labels
        else:
            labels = {k: v for k, v in (meta_in.get("labels") or {}).items() if _ours(k)}
            annotations = {k: v for k, v in (meta_in.get("annotations") or {}).items() if _ours(k)}
            stored = {
                k: v
                for k, v in meta_in.items()
                if k not in ("namespace", "resourceVersion", "uid") and v not in (None, "", {}, [])
            }
            if ck.kind not in POLICY_KINDS:
                stored.pop("name", None)
            else:
                stored["name"] = meta_in.get("name") or name
            annotations[METADATA_ANNOTATION] = json.dumps(stored, sort_keys=True)
            if labels:
                meta["labels"] = labels
            meta["annotations"] = annotations
    body["metadata"] = meta
    if spec is not None:
        body["spec"] = spec
    if "status" in value:
        body["status"] = copy.deepcopy(value["status"])
    return body


def from_cr(ck: CrdKind, mode: str, cr: dict[str, Any]) -> dict[str, Any]:
    """The v3 object a CR stores (without resourceVersion: that is the KV revision)."""
    meta_cr = cr.get("metadata") or {}
    meta: dict[str, Any] = {"name": meta_cr.get("name", "")}
    if ck.namespaced:
        meta["namespace"] = meta_cr.get("namespace", "")
    spec = copy.deepcopy(cr.get("spec"))
    if mode == V3:
        for k, v in meta_cr.items():
            if k not in ("resourceVersion", "managedFields", "generation", "selfLink"):
                meta[k] = v
    else:
        if meta_cr.get("uid"):
            meta["uid"] = convert_uid(meta_cr["uid"])
        labels = dict(meta_cr.get("labels") or {})
        annotations = dict(meta_cr.get("annotations") or {})
        raw = annotations.pop(METADATA_ANNOTATION, None)
        stored: dict[str, Any] = {}
        if raw:
            try:
                stored = json.loads(raw)
            except ValueError:
                raise InvalidValueError(
                    f"{ck.kind}({meta_cr.get('name')}): bad {METADATA_ANNOTATION} annotation"
                ) from None
        labels.update(stored.get("labels") or {})
        annotations.update(stored.get("annotations") or {})
        for k, v in stored.items():
            if k not in ("labels", "annotations", "name", "namespace", "uid", "resourceVersion"):
                meta[k] = v
        if "creationTimestamp" not in meta and meta_cr.get("creationTimestamp"):
            meta["creationTimestamp"] = meta_cr["creationTimestamp"]
        if stored.get("name"):
            meta["name"] = stored["name"]
        elif (
            ck.kind in POLICY_KINDS
            and (spec or {}).get("tier", "default") in ("default", "")
            and meta["name"].startswith("default.")
        ):
            meta["name"] = meta["name"][len("default.") :]
        if labels:
            meta["labels"] = labels
        if annotations:
            meta["annotations"] = annotations
        if ck.kind == "BlockAffinity" and isinstance(spec, dict):
            spec["deleted"] = spec.get("deleted") in (True, "true")
            if not spec.get("type"):
                spec["type"] = "host"
    if ck.kind == "Tier" and isinstance(spec, dict):
        spec.setdefault("order", 1_000_000)
        spec.setdefault("defaultAction", "Deny")
    out: dict[str, Any] = {"apiVersion": V3_API_VERSION, "kind": ck.kind, "metadata": meta}
    if spec is not None:
        out["spec"] = spec
    if cr.get("status") is not None:
        out["status"] = copy.deepcopy(cr["status"])
    return out


def is_soft_deleted(ck: CrdKind, cr: dict[str, Any]) -> bool:
    return ck.kind in SOFT_DELETE_KINDS and (cr.get("spec") or {}).get("deleted") in (True, "true")
