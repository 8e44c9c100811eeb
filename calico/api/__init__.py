"""projectcalico.org/v3 resources: models, validation and YAML/JSON I/O.

Kinds are registered when their module is imported: ``kind_class`` imports one module, ``kinds()``
all of them. Typical use::

    from calico.api import load_documents, dump_resources
    resources = load_documents(text, source="policy.yaml")

The names below are resolved on first use, so importing a light submodule (the kind table,
``calico.api.kind_table``) does not pay for pydantic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from calico.api.base import (
        API_VERSION,
        CalicoModel,
        ObjectMeta,
        Resource,
        kind_class,
        kinds,
        resource_class,
    )
    from calico.api.errors import (
        APIError,
        DocumentFormatError,
        FieldIssue,
        ResourceValidationError,
        UnknownKindError,
    )
    from calico.api.io import (
        dump_resources,
        issues_from_pydantic,
        load_documents,
        load_file,
        parse_resource,
        resource_to_wire,
        with_default_namespace,
    )

__all__ = [
    "API_VERSION",
    "APIError",
    "CalicoModel",
    "DocumentFormatError",
    "FieldIssue",
    "ObjectMeta",
    "Resource",
    "ResourceValidationError",
    "UnknownKindError",
    "dump_resources",
    "issues_from_pydantic",
    "kind_class",
    "kinds",
    "load_documents",
    "load_file",
    "parse_resource",
    "resource_class",
    "resource_to_wire",
    "with_default_namespace",
]
_BASE, _ERRORS, _IO = "calico.api.base", "calico.api.errors", "calico.api.io"
#: Where each name lives: asking for an error class must not import pydantic (calico.api.base).
_HOMES = {
    **dict.fromkeys(
        ("API_VERSION", "CalicoModel", "ObjectMeta", "Resource", "kind_class", "kinds"), _BASE
    ),
    "resource_class": _BASE,
    **dict.fromkeys(
        (
            "APIError",
            "DocumentFormatError",
            "FieldIssue",
            "ResourceValidationError",
            "UnknownKindError",
        ),
        _ERRORS,
    ),
    **dict.fromkeys(
        (
            "dump_resources",
            "issues_from_pydantic",
            "load_documents",
            "load_file",
            "parse_resource",
            "resource_to_wire",
            "with_default_namespace",
        ),
        _IO,
    ),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is not None:
        globals()[name] = value = vars(importlib.import_module(home))[name]
        return value
    raise AttributeError(f"module 'calico.api' has no attribute {name!r}")
