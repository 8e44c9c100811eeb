"""v3 resources as values: a stored resource decoded (and validated) through ``calico.api``.

A ``ResourceKey``'s value on the syncer's stream is the v3 resource itself, so decoding one is
shared by the update processors and the v1 value codec (``calico.model.values``); it lives here,
below both, so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import calico.api as api
from calico.model.resources import ResourceKey

if TYPE_CHECKING:
    from calico.api import Resource

# calico.api's names resolve on first use: importing this module does not import pydantic.
R = TypeVar("R", bound="Resource")


def decode_resource(key: ResourceKey, value: Any) -> Resource:
    """Validate a stored value as the v3 resource ``key`` names; the key (not the value) is
    authoritative for kind, name and namespace."""
    cls = api.kind_class(key.kind)
    if cls is None:
        raise ValueError(f"{key.kind} {key.name!r}: not a projectcalico.org/v3 kind")
    return decode(key, value, cls)


def decode(key: ResourceKey, value: Any, cls: type[R]) -> R:
    """Validate a stored value as ``cls``."""
    where = f"{key.kind} {key.namespace + '/' if key.namespace else ''}{key.name}"
    if key.kind != cls.KIND:
        raise ValueError(f"{where}: expected a {cls.KIND}")
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: value is not a JSON object")
    data = dict(value)
    meta = dict(data.get("metadata") or {})
    meta.setdefault("name", key.name)
    if key.namespace:
        meta.setdefault("namespace", key.namespace)
    data["metadata"] = meta
    data.setdefault("apiVersion", "projectcalico.org/v3")
    data.setdefault("kind", cls.KIND)
    try:
        res = api.parse_resource(data, source=where)
    except api.APIError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(res, cls):
        raise ValueError(f"{where}: decoded a {type(res).__name__}, expected {cls.KIND}")
    return res
