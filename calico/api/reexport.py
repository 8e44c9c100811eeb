"""Lazy re-exports for models that moved out of a module (to keep a Felix start from defining
kinds it never reads, design/performance.md "Cold start: the kinds Felix never reads (session
6)"): old imports keep working and get the same objects, imported on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def moved_attributes(namespace: dict[str, Any], moved: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``namespace`` (its ``globals()``): a name in ``moved`` is
    imported from the module it maps to and kept in ``namespace``; any other name is the usual
    AttributeError."""

    def __getattr__(name: str) -> Any:
        home = moved.get(name)
        if home is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    return __getattr__
