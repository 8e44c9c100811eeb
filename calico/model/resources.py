"""v3 resource keys (``/calico/resources/v3/projectcalico.org/<plural>/[<ns>/]<name>``).

The kind facts (plural, scope) come from the one kind table, ``calico.api.kind_table``; the
path shape follows from the scope, so a global kind never has a namespace segment and a
namespaced kind always has one. Names and namespaces are written verbatim (Kubernetes names
cannot contain ``/`` or ``%``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from calico.api.kind_table import KINDS, KINDS_BY_PLURAL, KindInfo, kind_info
from calico.model.base import Key, cached_hash, seg
from calico.model.escaping import InvalidKeyError

__all__ = [
    "KINDS",
    "KINDS_BY_PLURAL",
    "RESOURCE_PREFIX",
    "KindInfo",
    "ResourceKey",
    "kind_info",
    "resource_key_checked",
    "resource_prefix",
]

RESOURCE_PREFIX = "/calico/resources/v3/projectcalico.org/"


def resource_prefix(kind: str, namespace: str | None = None) -> str:
    """The list prefix for every resource of ``kind`` (optionally in one namespace)."""
    info = kind_info(kind)
    if info is None:
        raise InvalidKeyError(f"unknown resource kind {kind!r}")
    prefix = f"{RESOURCE_PREFIX}{info.plural}/"
    if namespace:
        if not info.namespaced:
            raise InvalidKeyError(f"{info.kind} is cluster-scoped; no namespace prefix")
        prefix += f"{namespace}/"
    return prefix


@cached_hash
@dataclass(frozen=True, slots=True)
class ResourceKey(Key):
    """A whole v3 resource; ``namespace`` is ``""`` for cluster-scoped kinds."""

    LEADING_SLASH_REQUIRED: ClassVar[bool] = True

    kind: str
    name: str
    namespace: str = ""

    def __post_init__(self) -> None:
        # Canonical kind spelling, so ResourceKey("node", "a") == ResourceKey("Node", "a").
        if self.kind not in KINDS and (info := kind_info(self.kind)):
            object.__setattr__(self, "kind", info.kind)
        Key.__post_init__(self)

    def default_path(self) -> str:
        info = kind_info(self.kind)
        if info is None:
            raise InvalidKeyError(f"ResourceKey: unknown kind {self.kind!r}")
        name = seg(self, "name", self.name)
        if info.namespaced:
            ns = seg(self, "namespace", self.namespace)
            return f"{RESOURCE_PREFIX}{info.plural}/{ns}/{name}"
        if self.namespace:
            raise InvalidKeyError(f"ResourceKey: {info.kind} is cluster-scoped but has a namespace")
        return f"{RESOURCE_PREFIX}{info.plural}/{name}"


_new = object.__new__
_set = object.__setattr__


def resource_key_checked(kind: str, name: str, namespace: str) -> ResourceKey:
    """``ResourceKey(kind, name, namespace)`` without its checks, for a caller that has made
    them: ``kind`` spelled as in ``KINDS``, ``name`` non-empty without ``/``, ``namespace``
    non-empty without ``/`` for a namespaced kind and ``""`` otherwise. The syncer builds one
    per stored resource from a path it has sliced and checked (``_WatcherCache.source_key``;
    design/performance.md "The WorkloadEndpoint snapshot at 250,000")."""
    key = _new(ResourceKey)
    _set(key, "kind", kind)
    _set(key, "name", name)
    _set(key, "namespace", namespace)
    _set(key, "_hash", hash((kind, name, namespace)))  # cached_hash's answer, computed once
    return key
