"""Policy rules shared by NetworkPolicy, GlobalNetworkPolicy, their staged forms and Profile.

Field-level checks live on the smallest model that can make them (a port on ``PortValue``, a
CIDR on ``EntityRule``); checks that need several fields run in ``Rule`` after its fields are
valid and report at the exact sub-path (``destination.ports``) through ``raise_issues``.
Checks that depend on the rule's direction (ingress/egress) live with the policy.
"""

import ipaddress
import re
from typing import Annotated, Literal, Self

from pydantic import BeforeValidator, Field, field_validator, model_validator

from calico.api import validators as v
from calico.api.base import CalicoModel
from calico.api.ruleparse import (
    PORT_PROTOCOLS as PORT_PROTOCOLS,
)
from calico.api.ruleparse import (
    PROTOCOL_NUMBERS as PROTOCOL_NUMBERS,
)
from calico.api.ruleparse import (
    parse_port,
    parse_protocol,
    protocol_number,
    supports_ports,
)

Loc = tuple[str | int, ...]

# The parses live in calico.api.ruleparse (no pydantic), shared with the lean readers.
_parse_protocol = parse_protocol
_parse_port = parse_port


ProtocolValue = Annotated[int | str, BeforeValidator(_parse_protocol)]

#: Upstream's numorstring.DSCP names and the code points they stand for.
DSCP_NAMES: dict[str, int] = {
    "DF": 0,
    "EF": 46,
    **{f"AF{c}{d}": 8 * c + 2 * d for c in range(1, 5) for d in range(1, 4)},
    **{f"CS{n}": 8 * n for n in range(7)},
}


def _parse_dscp(value: object) -> int | str:
    """Upstream's numorstring.DSCP: a code point 0-63 or one of its names (case-sensitive);
    a numeric string becomes the number, as the Go unmarshaller does."""
    rule = f"must be 0-63 or one of {', '.join(DSCP_NAMES)}"
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"DSCP value {value!r} is invalid: {rule}")
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, int):
        if not 0 <= value <= 63:
            raise ValueError(f"DSCP value {value} is invalid: {rule}")
        return value
    if value not in DSCP_NAMES:
        raise ValueError(f"DSCP value {value!r} is invalid: {rule}")
    return value


DSCPValue = Annotated[int | str, BeforeValidator(_parse_dscp)]
PortValue = Annotated[int | str, BeforeValidator(_parse_port)]
Action = Literal["Allow", "Deny", "Log", "Pass"]


class ICMPFields(CalicoModel):
    """ICMP type/code match; the kernel can only match a code together with a type."""

    type: int | None = None
    code: int | None = None

    @field_validator("type")
    @classmethod
    def _type_range(cls, value: int | None) -> int | None:
        if value is not None and not 0 <= value <= 254:
            raise ValueError(f"ICMP type {value} is out of range 0-254")
        return value

    @field_validator("code")
    @classmethod
    def _code_range(cls, value: int | None) -> int | None:
        if value is not None and not 0 <= value <= 255:
            raise ValueError(f"ICMP code {value} is out of range 0-255")
        return value

    @model_validator(mode="after")
    def _code_needs_type(self) -> Self:
        if self.code is not None and self.type is None:
            v.raise_issues([(("code",), "ICMP code specified without an ICMP type")])
        return self


class ServiceMatch(CalicoModel):
    """A Kubernetes Service whose endpoints (and their ports) the rule matches."""

    name: str | None = None
    namespace: str | None = None

    @field_validator("name", "namespace")
    @classmethod
    def _names(cls, value: str | None) -> str | None:
        if value:
            v.dns1123_subdomain(value)
        return value


class ServiceAccountMatch(CalicoModel):
    names: list[str] | None = None
    selector: str | None = None

    @field_validator("selector")
    @classmethod
    def _selector(cls, value: str | None) -> str | None:
        return v.validate_selector(value) if value else value


class HTTPPath(CalicoModel):
    exact: str | None = Field(default=None, max_length=1024)
    prefix: str | None = Field(default=None, max_length=1024)

    @model_validator(mode="after")
    def _one_of(self) -> Self:
        if self.exact and self.prefix:
            raise ValueError("only one of 'exact' or 'prefix' may be set")
        path = self.exact or self.prefix
        if not path:
            raise ValueError("one of 'exact' or 'prefix' must be set")
        if not path.startswith("/") or any(c in path for c in "? #"):
            raise ValueError(f"path {path!r} must start with '/' and not contain '?', '#' or ' '")
        return self


class HTTPMatch(CalicoModel):
    """HTTP request match (application layer policy); methods and paths are ANDed."""

    methods: list[str] | None = Field(default=None, max_length=20)
    paths: list[HTTPPath] | None = Field(default=None, max_length=20)

    @field_validator("methods")
    @classmethod
    def _unique_methods(cls, value: list[str] | None) -> list[str] | None:
        if value and len(set(value)) != len(value):
            raise ValueError(f"methods must not contain duplicates: {value}")
        return value


class RuleMetadata(CalicoModel):
    annotations: dict[str, str] | None = None

    @field_validator("annotations")
    @classmethod
    def _keys(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for key in value or {}:
            v.annotation_key(key)
        return value


_ONLY_GLOBAL = re.compile(r"\s*global\(\s*\)\s*")


class EntityRule(CalicoModel):
    """Source or destination match criteria; ``not*`` fields must match none of their entries."""

    nets: list[str] | None = Field(default=None, max_length=256)
    selector: str | None = Field(default=None, max_length=1024)
    namespace_selector: str | None = Field(default=None, max_length=1024)
    services: ServiceMatch | None = None
    ports: list[PortValue] | None = Field(default=None, max_length=50)
    not_nets: list[str] | None = Field(default=None, max_length=256)
    not_selector: str | None = Field(default=None, max_length=1024)
    not_ports: list[PortValue] | None = Field(default=None, max_length=50)
    service_accounts: ServiceAccountMatch | None = None

    @field_validator("nets", "not_nets")
    @classmethod
    def _nets(cls, value: list[str] | None) -> list[str] | None:
        # Upstream's "net" rule: a bare IP or a CIDR with no host bits set.
        for item in value or []:
            v.cidr(item, strict=True)
        return value

    @field_validator("selector", "not_selector", "namespace_selector")
    @classmethod
    def _selectors(cls, value: str | None) -> str | None:
        return v.validate_selector(value) if value else value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        issues: list[tuple[Loc, str]] = []
        if self.selector and "global(" in self.selector:
            msg = "global() can only be used in an EntityRule namespaceSelector"
            issues.append((("selector",), msg))
        ns = self.namespace_selector or ""
        if "global(" in ns and not _ONLY_GLOBAL.fullmatch(ns):
            msg = "global() cannot be combined with other selectors"
            issues.append((("namespaceSelector",), msg))
        if self.services is not None:
            conflicts = [
                ("name", not self.services.name, "services must specify a service name"),
                ("namespaceSelector", bool(ns), "cannot specify namespaceSelector and services"),
                (
                    "selector",
                    bool(self.selector or self.not_selector),
                    "cannot specify selector/notSelector and services",
                ),
                (
                    "serviceAccounts",
                    self.service_accounts is not None,
                    "cannot specify serviceAccounts and services",
                ),
                (
                    "nets",
                    bool(self.nets or self.not_nets),
                    "cannot specify nets/notNets and services",
                ),
            ]
            for field, bad, msg in conflicts:
                if bad:
                    loc: Loc = ("services", "name") if field == "name" else ("services",)
                    issues.append((loc, msg))
        v.raise_issues(issues)
        return self


class Rule(CalicoModel):
    """One match-and-act rule. All criteria are ANDed; the first matching rule wins."""

    action: Action
    ip_version: Literal[4, 6] | None = None
    protocol: ProtocolValue | None = None
    icmp: ICMPFields | None = None
    not_protocol: ProtocolValue | None = None
    not_icmp: ICMPFields | None = Field(default=None, alias="notICMP")
    source: EntityRule | None = None
    destination: EntityRule | None = None
    http: HTTPMatch | None = None
    metadata: RuleMetadata | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        issues: list[tuple[Loc, str]] = []
        sides = (("source", self.source), ("destination", self.destination))
        if not supports_ports(self.protocol):
            for side, ent in sides:
                for field, ports in (
                    ("ports", ent and ent.ports),
                    ("notPorts", ent and ent.not_ports),
                ):
                    if ports:
                        msg = "rules that specify ports must set protocol to TCP, UDP or SCTP"
                        issues.append(((side, field), msg))
        if self.http is not None:
            if self.protocol is not None and protocol_number(self.protocol) != 6:
                msg = "rules with an http match must have protocol TCP or no protocol"
                issues.append((("protocol",), msg))
            if self.action != "Allow":
                issues.append((("http",), "http match is only valid on Allow rules"))
        if self.icmp is not None and protocol_number(self.protocol) not in (1, 58):
            msg = "rules that specify icmp must set protocol to ICMP or ICMPv6"
            issues.append((("icmp",), msg))
        for proto in (self.protocol, self.not_protocol):
            num = protocol_number(proto)
            if num == 1 and self.ip_version not in (None, 4):
                issues.append((("ipVersion",), "protocol ICMP requires ipVersion 4"))
            if num == 58 and self.ip_version not in (None, 6):
                issues.append((("ipVersion",), "protocol ICMPv6 requires ipVersion 6"))
        issues.extend(self._net_version_issues())
        dest = self.destination
        if dest is not None and dest.services is not None and (dest.ports or dest.not_ports):
            field = "ports" if dest.ports else "notPorts"
            msg = "ports and notPorts cannot be specified with services"
            issues.append((("destination", field), msg))
        v.raise_issues(issues)
        return self

    def _net_version_issues(self) -> list[tuple[Loc, str]]:
        """Nets must agree with ipVersion and must not mix IPv4 and IPv6 within one rule."""
        issues: list[tuple[Loc, str]] = []
        seen: set[int] = set()
        for side, ent in (("source", self.source), ("destination", self.destination)):
            if ent is None:
                continue
            for field, nets in (("nets", ent.nets), ("notNets", ent.not_nets)):
                versions = {ipaddress.ip_network(n, strict=False).version for n in nets or []}
                if self.ip_version is not None and versions - {self.ip_version}:
                    msg = f"rule ipVersion {self.ip_version} doesn't match the CIDR version"
                    issues.append(((side, field), msg))
                if len(versions | seen) > 1:
                    issues.append(((side, field), "rule contains both IPv4 and IPv6 CIDRs"))
                seen |= versions
        return issues
