"""QoSPolicy: DSCP marking of egress traffic (no tier, no ingress, no deny).

A module of its own, imported when the kind is first used (the kind table names it), so a
reader of the other policy kinds does not define its models (design/performance.md "Schema
builds"). ``calico.api.policy`` still answers for every name defined here.
"""

import ipaddress
from typing import Annotated, ClassVar, Literal, Self

from pydantic import AfterValidator, Field, WithJsonSchema, field_validator, model_validator

from calico.api import validators as v
from calico.api.base import CalicoModel, Resource, register
from calico.api.rules import DSCPValue, Loc, PortValue, ProtocolValue, supports_ports


class QoSAction(CalicoModel):
    dscp: Annotated[DSCPValue, WithJsonSchema(v.INT_OR_STRING)] | None = None


class QoSEntityRule(CalicoModel):
    nets: list[Annotated[str, AfterValidator(v.cidr)]] | None = None
    ports: list[PortValue] | None = None


class QoSRule(CalicoModel):
    action: QoSAction
    ip_version: Literal[4, 6] | None = None
    protocol: ProtocolValue | None = None
    destination: QoSEntityRule | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        issues: list[tuple[Loc, str]] = []
        if self.action.dscp is None:
            issues.append((("action", "dscp"), "a QoS rule action must set dscp"))
        dest = self.destination
        if dest and dest.ports and not supports_ports(self.protocol):
            issues.append(
                (("destination", "ports"), "ports require protocol TCP, UDP or SCTP to be set")
            )
        if dest and dest.nets and self.ip_version is not None:
            for net in dest.nets:
                if ipaddress.ip_network(net, strict=False).version != self.ip_version:
                    msg = f"rule ipVersion {self.ip_version} doesn't match the CIDR {net}"
                    issues.append((("destination", "nets"), msg))
        v.raise_issues(issues)
        return self


class QoSPolicySpec(CalicoModel):
    order: float | None = None
    selector: str | None = Field(default=None, max_length=1024)
    namespace_selector: str | None = Field(default=None, max_length=1024)
    egress: Annotated[list[QoSRule], Field(min_length=1)]

    @field_validator("selector", "namespace_selector")
    @classmethod
    def _selectors(cls, value: str | None) -> str | None:
        return v.validate_selector(value) if value else value

    _finite = field_validator("order")(v.finite_order)


@register
class QoSPolicy(Resource):
    """Sets the DSCP field on selected endpoints' egress traffic (cluster-scoped)."""

    KIND: ClassVar[str] = "QoSPolicy"

    spec: QoSPolicySpec
