"""projectcalico.org/v3 resources: models, validation and YAML/JSON I/O.

Kinds are registered when their module is imported: ``kind_class`` imports one module, ``kinds()``
all of them. Typical use::

    from calico.api import load_documents, dump_resources
    resources = load_documents(text, source="policy.yaml")
"""

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
