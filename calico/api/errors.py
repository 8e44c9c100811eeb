"""Errors raised while loading or validating v3 resources.

Every error names where the problem is (file, document, kind/name, field path) so a user with a
hundred-document manifest can find the line to fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FieldIssue:
    """One broken rule: a dotted field path (``spec.ingress[0].protocol``) and a message."""

    path: str
    message: str

    def __str__(self) -> str:
        # Some messages already end with the path (calicoctl's unknown-field text); don't repeat it.
        if not self.path or self.message.endswith(f": {self.path}"):
            return self.message
        return f"{self.path}: {self.message}"


class APIError(Exception):
    """Base class for everything `calico.api` raises on bad user input."""


@dataclass
class ResourceValidationError(APIError):
    """A document failed validation.

    ``source`` is the file name (or ``<stdin>``), ``document`` its 1-based index in a stream,
    ``item`` the 1-based index inside a ``List`` document.
    """

    issues: list[FieldIssue]
    kind: str = ""
    name: str = ""
    source: str = ""
    document: int | None = None
    extra: dict[str, str] = field(default_factory=dict)
    item: int | None = None  # 1-based index inside a List / sequence document

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def location(self) -> str:
        parts = []
        if self.source:
            parts.append(self.source)
        if self.document is not None:
            parts.append(f"document {self.document}")
        if self.item is not None:
            parts.append(f"item {self.item}")
        if self.kind:
            parts.append(f"{self.kind}({self.name})" if self.name else self.kind)
        return ", ".join(parts)

    def __str__(self) -> str:
        loc = self.location()
        body = "; ".join(str(i) for i in self.issues)
        return f"{loc}: {body}" if loc else body


class UnknownKindError(APIError):
    """The document's kind (or apiVersion) is not one we know."""


class DocumentFormatError(APIError):
    """The text is not valid YAML/JSON or not a mapping with apiVersion/kind."""
