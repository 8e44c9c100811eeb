"""The staged policy kinds: StagedNetworkPolicy, StagedGlobalNetworkPolicy and
StagedKubernetesNetworkPolicy (with the Kubernetes NetworkPolicy shape it carries).

A module of their own, imported when a staged kind is first used (the kind table names it):
a reader of enforced policies, such as ``calicoctl explain`` on a datastore without staged
policies, does not define their 13 models (design/performance.md "Schema builds").
``calico.api.policy`` still answers for every name defined here.
"""

import re
from typing import Annotated, Any, ClassVar, Literal, Self, TypeVar

from pydantic import AfterValidator, Field, field_validator, model_validator

from calico.api import validators as v
from calico.api.base import CalicoModel, Resource, register
from calico.api.policy import (
    _GNP_NAME,
    _NP_NAME,
    DEFAULT_TIER,
    GlobalNetworkPolicySpec,
    NetworkPolicySpec,
    PolicyType,
    StagedAction,
    _PolicyResource,
)
from calico.api.rules import Loc


def _staged_delete_issues(spec: CalicoModel, keep: tuple[str, ...]) -> list[tuple[Loc, str]]:
    """With stagedAction Delete only the identifying fields may be set."""
    issues: list[tuple[Loc, str]] = []
    for name, info in type(spec).model_fields.items():
        if name in keep:
            continue
        value = getattr(spec, name)
        if value not in (None, [], {}, "", False):
            wire = info.alias or name
            issues.append(((wire,), "must not be set when stagedAction is Delete"))
    return issues


_Staged = TypeVar("_Staged", "StagedNetworkPolicySpec", "StagedGlobalNetworkPolicySpec")


def _check_staged(spec: _Staged) -> _Staged:
    """stagedAction defaults to Set; Delete carries only the identity, Set is a full policy."""
    if spec.staged_action is None:
        spec.staged_action = "Set"
    if spec.staged_action == "Delete":
        spec.tier = spec.tier or DEFAULT_TIER
        v.raise_issues(_staged_delete_issues(spec, ("staged_action", "tier")))
        return spec
    spec._apply_defaults()
    v.raise_issues(spec._all_issues())
    return spec


class StagedNetworkPolicySpec(NetworkPolicySpec):
    staged_action: StagedAction | None = None

    @model_validator(mode="after")
    def _default_and_check(self) -> Self:
        return _check_staged(self)


class StagedGlobalNetworkPolicySpec(GlobalNetworkPolicySpec):
    staged_action: StagedAction | None = None

    @model_validator(mode="after")
    def _default_and_check(self) -> Self:
        return _check_staged(self)


# --- Kubernetes NetworkPolicy shape (networking.k8s.io/v1), for StagedKubernetesNetworkPolicy.


class LabelSelectorRequirement(CalicoModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] | None = None

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        return v.label_key(value)

    @model_validator(mode="after")
    def _values(self) -> Self:
        if self.operator in ("In", "NotIn") and not self.values:
            v.raise_issues(
                [(("values",), f"values must be non-empty for operator {self.operator}")]
            )
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            v.raise_issues([(("values",), f"values must be empty for operator {self.operator}")])
        for i, value in enumerate(self.values or []):
            try:
                v.label_value(value)
            except ValueError as exc:
                v.raise_issues([(("values", i), str(exc))])
        return self


class LabelSelector(CalicoModel):
    """A Kubernetes label selector; empty matches everything."""

    match_labels: Annotated[dict[str, str], AfterValidator(v.label_map)] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class IPBlock(CalicoModel):
    cidr: str
    except_: list[str] | None = Field(default=None, alias="except")

    @model_validator(mode="after")
    def _nets(self) -> Self:
        import ipaddress

        try:
            v.cidr(self.cidr)
            outer = ipaddress.ip_network(self.cidr, strict=False)
        except ValueError as exc:
            v.raise_issues([(("cidr",), str(exc))])
            return self
        issues: list[tuple[Loc, str]] = []
        for i, item in enumerate(self.except_ or []):
            try:
                v.cidr(item)
                inner = ipaddress.ip_network(item, strict=False)
            except ValueError as exc:
                issues.append((("except", i), str(exc)))
                continue
            if inner.version != outer.version or not inner.subnet_of(outer):  # type: ignore[arg-type]
                issues.append((("except", i), f"{item!r} must be within cidr {self.cidr!r}"))
        v.raise_issues(issues)
        return self


class NetworkPolicyPeer(CalicoModel):
    pod_selector: LabelSelector | None = None
    namespace_selector: LabelSelector | None = None
    ip_block: IPBlock | None = None

    @model_validator(mode="after")
    def _exclusive(self) -> Self:
        if self.ip_block is not None and (self.pod_selector or self.namespace_selector):
            raise ValueError("ipBlock cannot be combined with podSelector or namespaceSelector")
        if self.ip_block is None and self.pod_selector is None and self.namespace_selector is None:
            raise ValueError("one of podSelector, namespaceSelector or ipBlock must be set")
        return self


def _k8s_port(value: object) -> int | str:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"port {value!r} must be a number or a port name")
    if isinstance(value, int):
        if not 1 <= value <= 65535:
            raise ValueError(f"port {value} is out of range 1-65535")
        return value
    return v.port_name(value)


class NetworkPolicyPort(CalicoModel):
    protocol: Literal["TCP", "UDP", "SCTP"] | None = None
    port: int | str | None = None
    end_port: int | None = None

    @field_validator("port", mode="before")
    @classmethod
    def _port(cls, value: object) -> object:
        return None if value is None else _k8s_port(value)

    @model_validator(mode="after")
    def _range(self) -> Self:
        if self.end_port is None:
            return self
        if not isinstance(self.port, int):
            v.raise_issues([(("endPort",), "endPort requires a numeric port")])
        elif not self.port <= self.end_port <= 65535:
            v.raise_issues([(("endPort",), "endPort must be >= port and <= 65535")])
        return self


class NetworkPolicyIngressRule(CalicoModel):
    ports: list[NetworkPolicyPort] | None = None
    from_: list[NetworkPolicyPeer] | None = Field(default=None, alias="from")


class NetworkPolicyEgressRule(CalicoModel):
    ports: list[NetworkPolicyPort] | None = None
    to: list[NetworkPolicyPeer] | None = None


class StagedKubernetesNetworkPolicySpec(CalicoModel):
    """A Kubernetes NetworkPolicy spec plus ``stagedAction``."""

    staged_action: StagedAction | None = None
    pod_selector: LabelSelector | None = None
    ingress: list[NetworkPolicyIngressRule] | None = None
    egress: list[NetworkPolicyEgressRule] | None = None
    policy_types: list[PolicyType] | None = Field(default=None, max_length=2)

    @model_validator(mode="after")
    def _default_and_check(self) -> Self:
        if self.staged_action is None:
            self.staged_action = "Set"
        issues: list[tuple[Loc, str]] = []
        if self.staged_action == "Delete":
            issues = _staged_delete_issues(self, ("staged_action",))
        for t in sorted(set(self.policy_types or [])):
            if (self.policy_types or []).count(t) > 1:
                issues.append((("policyTypes",), f"'{t}' type specified more than once"))
        v.raise_issues(issues)
        return self


@register
class StagedNetworkPolicy(_PolicyResource):
    KIND: ClassVar[str] = "StagedNetworkPolicy"
    NAME_PATTERN: ClassVar[re.Pattern[str]] = _NP_NAME
    NAME_WHAT: ClassVar[str] = "policy"

    spec: StagedNetworkPolicySpec = Field(default_factory=lambda: StagedNetworkPolicySpec())


@register
class StagedGlobalNetworkPolicy(_PolicyResource):
    KIND: ClassVar[str] = "StagedGlobalNetworkPolicy"
    NAME_PATTERN: ClassVar[re.Pattern[str]] = _GNP_NAME
    NAME_WHAT: ClassVar[str] = "global policy"

    spec: StagedGlobalNetworkPolicySpec = Field(
        default_factory=lambda: StagedGlobalNetworkPolicySpec()
    )


@register
class StagedKubernetesNetworkPolicy(Resource):
    KIND: ClassVar[str] = "StagedKubernetesNetworkPolicy"

    spec: StagedKubernetesNetworkPolicySpec = Field(
        default_factory=lambda: StagedKubernetesNetworkPolicySpec()
    )
    status: dict[str, Any] | None = None
