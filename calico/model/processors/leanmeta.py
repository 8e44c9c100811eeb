"""The envelope of a stored v3 resource (apiVersion, kind, ObjectMeta) checked without
pydantic, for the lean readers (``leanpolicy``, ``leanconfig``): the checks of
``Resource._check_resource_metadata`` for the plain ObjectMeta fields; anything else declines.
"""

from __future__ import annotations

from typing import Any

from calico.api import validators as v
from calico.model.resources import ResourceKey

API_VERSION = "projectcalico.org/v3"
_ANNOTATIONS_MAX = 256 * 1024
_TOP = frozenset({"apiVersion", "kind", "metadata", "spec"})
_META_STRINGS = frozenset({"name", "namespace", "uid", "creationTimestamp", "resourceVersion"})
_META = _META_STRINGS | {"labels", "annotations"}


class Decline(Exception):
    """The document is outside the lean shape: the model reads it (never an error)."""


def top(
    key: ResourceKey, value: Any, kind: str, *, namespaced: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    if key.kind != kind or bool(key.namespace) != namespaced or type(value) is not dict:
        raise Decline
    if not value.keys() <= _TOP:
        raise Decline
    if value.get("apiVersion", API_VERSION) != API_VERSION or value.get("kind", kind) != kind:
        raise Decline
    meta, spec = value.get("metadata", {}), value.get("spec", {})
    if type(meta) is not dict or type(spec) is not dict:
        raise Decline
    _meta(key, meta, namespaced)
    return meta, spec


def _meta(key: ResourceKey, meta: dict[str, Any], namespaced: bool) -> None:
    """ObjectMeta's checks (``Resource._check_resource_metadata``) for the plain fields."""
    if not meta.keys() <= _META:
        raise Decline
    for field in _META_STRINGS & meta.keys():
        if type(meta[field]) is not str:
            raise Decline
    if "namespace" in meta and not namespaced:
        raise Decline
    if namespaced:
        namespace = meta.get("namespace", key.namespace)
        if not namespace:
            raise Decline
        v.dns1123_label(namespace, "namespace")
    labels = meta.get("labels")
    if labels is not None:
        if type(labels) is not dict:
            raise Decline
        for k, val in labels.items():
            if type(val) is not str:
                raise Decline
            v.label_key(k)
            v.label_value(val)
    annotations = meta.get("annotations")
    if annotations is not None:
        if type(annotations) is not dict:
            raise Decline
        total = 0
        for k, val in annotations.items():
            if type(val) is not str:
                raise Decline
            total += len(k) + len(val)
            v.annotation_key(k)
        if total > _ANNOTATIONS_MAX:
            raise Decline


def name_of(key: ResourceKey, meta: dict[str, Any]) -> str:
    name = meta.get("name", key.name)
    if not name:  # the loader's "name is required"
        raise Decline
    return str(name)
