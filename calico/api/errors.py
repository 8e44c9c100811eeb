"""Errors raised while loading or validating v3 resources.

Every error names where the problem is (file, document, kind/name, field path) so a user with a
hundred-document manifest can find the line to fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Go struct field names where upstream's differ from the capitalised wire name (acronyms).
_GO_NAMES = {
    "cidr": "CIDR",
    "peerIP": "PeerIP",
    "asNumber": "ASNumber",
    "localASNumber": "LocalASNumber",
    "ipipMode": "IPIPMode",
    "vxlanMode": "VXLANMode",
    "natOutgoing": "NATOutgoing",
    "disableBGPExport": "DisableBGPExport",
    "icmp": "ICMP",
    "notICMP": "NotICMP",
    "ipVersion": "IPVersion",
    "containerID": "ContainerID",
    "ipNetworks": "IPNetworks",
    "ipNATs": "IPNATs",
    "ipv4Address": "IPv4Address",
    "ipv6Address": "IPv6Address",
    "reservedCIDRs": "ReservedCIDRs",
    "expectedIPs": "ExpectedIPs",
    "mac": "MAC",
    "ports": "Port",
    "notPorts": "Port",
}
# Fields upstream's validator names by their full struct path.
_GO_PATHS = {("IPPool", "spec.cidr"): "IPPool.Spec.CIDR"}
_NO_VALUE = object()


def go_value(value: Any) -> str:
    """``value`` as Go's ``%v`` prints it."""
    if value is None or value is _NO_VALUE:
        return "<nil>" if value is None else ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + " ".join(go_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_value(v)}" for k, v in sorted(value.items())) + "]"
    return str(value)


@dataclass
class FieldIssue:
    """One broken rule: a dotted field path (``spec.ingress[0].protocol``) and a message.

    ``value`` is the offending input, when known, for upstream's ``error with field`` text.
    """

    path: str
    message: str
    value: Any = field(default=_NO_VALUE, compare=False)

    def go_field(self, kind: str = "") -> str:
        """The Go struct field name upstream's validator reports (``PeerIP``, ``Port``)."""
        if (kind, self.path) in _GO_PATHS:
            return _GO_PATHS[(kind, self.path)]
        names = [p for p in self.path.replace("[", ".[").split(".") if p and p[0] != "["]
        last = names[-1] if names else ""
        return _GO_NAMES.get(last, last[:1].upper() + last[1:])

    def go_text(self, kind: str = "") -> str:
        """``<Field> = '<value>' (<reason>)``, the body of upstream's validation error."""
        return f"{self.go_field(kind)} = '{go_value(self.value)}' ({self.message})"

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

    def go_text(self) -> str:
        """Upstream's ``ErrorValidation`` text: one field, or a list of them."""
        if len(self.issues) == 1:
            return f"error with field {self.issues[0].go_text(self.kind)}"
        lines = "".join(f"-  {i.go_text(self.kind)}\n" for i in self.issues)
        return f"error with the following fields:\n{lines}"


class UnknownKindError(APIError):
    """The document's kind (or apiVersion) is not one we know."""


class DocumentFormatError(APIError):
    """The text is not valid YAML/JSON or not a mapping with apiVersion/kind."""
