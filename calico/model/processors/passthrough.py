"""Kinds the syncers send unchanged, and the node filter used by per-node syncers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from calico.model.processors.common import Output, passthrough, resource_key

Processor = Callable[[str, Any], Mapping[str, Any]]


def resource_passthrough(path: str, value: Any) -> Output:
    """The v3 resource as stored, under its canonical ``ResourceKey`` path."""
    return passthrough(path, value)


def _resource_node(path: str, value: Any) -> str | None:
    """Which node a resource belongs to: ``spec.node`` if it has one, else a Node's name."""
    spec = value.get("spec") if isinstance(value, Mapping) else None
    if isinstance(spec, Mapping) and isinstance(spec.get("node"), str):
        return str(spec["node"])
    key = resource_key(path)
    return key.name if key.kind == "Node" else None


def for_node(node: str, inner: Processor = resource_passthrough) -> Processor:
    """Wrap ``inner`` so resources of any other node produce nothing (the per-node syncers
    only want their own node's Node / BlockAffinity)."""

    def process(path: str, value: Any) -> Mapping[str, Any]:
        if _resource_node(path, value) != node:
            return {}
        return inner(path, value)

    process.__name__ = f"for_node({node!r}, {getattr(inner, '__name__', 'processor')})"
    return process
