"""Kinds the syncers send as the v3 resource itself, and the node filter used by per-node
syncers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from calico.model.base import Key
from calico.model.processors.common import Output, passthrough
from calico.model.resources import ResourceKey

#: ``(resource key, stored JSON) -> {v1 key: typed value}``; ValueError for a bad resource.
Processor = Callable[[ResourceKey, Any], Mapping[Key, Any]]


def resource_passthrough(key: ResourceKey, value: Any) -> Output:
    """The v3 resource, validated, under its ``ResourceKey``."""
    return passthrough(key, value)


def kubernetes_raw(key: ResourceKey, value: Any) -> Output:
    """A native Kubernetes object (Service, EndpointSlice) as the API returned it, under its
    ResourceKey: upstream's Felix syncer passes these through unconverted (KDD only)."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{key.kind} {key.name}: not an object")
    return {key: dict(value)}


def _resource_node(key: ResourceKey, value: Any) -> str | None:
    """Which node a resource belongs to: ``spec.node`` if it has one, else a Node's name."""
    spec = value.get("spec") if isinstance(value, Mapping) else None
    if isinstance(spec, Mapping) and isinstance(spec.get("node"), str):
        return str(spec["node"])
    return key.name if key.kind == "Node" else None


def for_node(node: str, inner: Processor = resource_passthrough) -> Processor:
    """Wrap ``inner`` so resources of any other node produce nothing (the per-node syncers
    only want their own node's Node / BlockAffinity). Filters on the stored JSON, before
    ``inner`` pays for validation."""

    def process(key: ResourceKey, value: Any) -> Mapping[Key, Any]:
        if _resource_node(key, value) != node:
            return {}
        return inner(key, value)

    process.__name__ = f"for_node({node!r}, {getattr(inner, '__name__', 'processor')})"
    return process
