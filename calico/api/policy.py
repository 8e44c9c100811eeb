"""Calico policy kinds: Tier and (Global)NetworkPolicy; the three staged kinds build on them
(calico.api.stagedpolicy), QoSPolicy stands apart (calico.api.qos).

Defaulting happens here, at validation time, so that what is loaded, stored and dumped is the
same thing: ``tier`` becomes ``default``, ``types`` is derived from the rules (and a staged
policy's ``stagedAction`` becomes ``Set``). Names in a non-default tier may carry the
``<tier>.`` prefix or not.
"""

import re
from typing import Any, ClassVar, Literal, Self

from pydantic import Field, field_validator, model_validator

from calico.api import validators as v
from calico.api.base import CalicoModel, Resource, register
from calico.api.conditions import Condition
from calico.api.policynames import (
    _GNP_NAME,
    _NP_NAME,
    BUILT_IN_TIERS,
    DEFAULT_TIER,
    _name_problem,
    default_policy_types,
)
from calico.api.policynames import (
    WELL_KNOWN_TIER_ORDERS as WELL_KNOWN_TIER_ORDERS,
)
from calico.api.policynames import (
    policy_base_name as policy_base_name,
)
from calico.api.reexport import moved_attributes
from calico.api.rules import EntityRule, Loc, Rule

PolicyType = Literal["Ingress", "Egress"]
StagedAction = Literal["Set", "Delete", "Learn", "Ignore"]
PerformanceHint = Literal["AssumeNeededOnEveryNode"]


class _PolicyResource(Resource):
    """The policy kinds' shared naming rule: ``NAME_PATTERN``, described as ``NAME_WHAT``."""

    NAME_PATTERN: ClassVar[re.Pattern[str]]
    NAME_WHAT: ClassVar[str]

    @classmethod
    def name_problem(cls, name: str) -> str | None:
        return _name_problem(name, cls.NAME_PATTERN, cls.NAME_WHAT)


class _PolicySpecBase(CalicoModel):
    """Fields shared by every Calico (not Kubernetes-shaped) policy spec."""

    tier: str | None = None
    order: float | None = None
    ingress: list[Rule] | None = Field(default=None, max_length=1024)
    egress: list[Rule] | None = Field(default=None, max_length=1024)
    selector: str | None = Field(default=None, max_length=1024)
    types: list[PolicyType] | None = Field(default=None, max_length=2)
    service_account_selector: str | None = Field(default=None, max_length=1024)
    performance_hints: list[PerformanceHint] | None = None

    GLOBAL: ClassVar[bool] = False

    @field_validator("tier")
    @classmethod
    def _tier_name(cls, value: str | None) -> str | None:
        if value:
            v.dns1123_label(value, "tier name")
        return value

    _finite = field_validator("order")(v.finite_order)

    @field_validator("selector", "service_account_selector")
    @classmethod
    def _selectors(cls, value: str | None) -> str | None:
        return v.validate_selector(value) if value else value

    @field_validator("performance_hints")
    @classmethod
    def _unique_hints(cls, value: list[str] | None) -> list[str] | None:
        if value and len(set(value)) != len(value):
            raise ValueError("performanceHints must not contain duplicates")
        return value

    def _apply_defaults(self) -> None:
        if not self.tier:
            self.tier = DEFAULT_TIER
        if not self.types:
            self.types = default_policy_types(self.ingress, self.egress)  # type: ignore[assignment]

    def _issues(self) -> list[tuple[Loc, str]]:
        issues: list[tuple[Loc, str]] = []
        for field in ("selector", "serviceAccountSelector", "namespaceSelector"):
            text = getattr(self, _PY_NAMES[field], None)
            if text and "global(" in text:
                msg = "global() can only be used in an EntityRule namespaceSelector"
                issues.append(((field,), msg))
        for t in sorted(set(self.types or [])):
            if (self.types or []).count(t) > 1:
                issues.append((("types",), f"'{t}' type specified more than once"))
        for i, rule in enumerate(self.egress or []):
            if rule.source is not None and rule.source.services is not None:
                msg = "services are not allowed in the source of an egress rule"
                issues.append((("egress", i, "source", "services"), msg))
            if rule.http is not None:
                issues.append((("egress", i, "http"), "http match is not allowed in egress rules"))
            issues.extend(self._service_namespace(("egress", i, "destination"), rule.destination))
        for i, rule in enumerate(self.ingress or []):
            if rule.destination is not None and rule.destination.services is not None:
                msg = "services are not allowed in the destination of an ingress rule"
                issues.append((("ingress", i, "destination", "services"), msg))
            issues.extend(self._service_namespace(("ingress", i, "source"), rule.source))
        return issues

    def _service_namespace(self, loc: Loc, ent: EntityRule | None) -> list[tuple[Loc, str]]:
        """Service names are namespaced; a global policy has no namespace to default to."""
        if self.GLOBAL and ent is not None and ent.services and not ent.services.namespace:
            msg = "a service in a global policy must specify a namespace"
            return [((*loc, "services", "namespace"), msg)]
        return []


_PY_NAMES = {
    "selector": "selector",
    "serviceAccountSelector": "service_account_selector",
    "namespaceSelector": "namespace_selector",
}


class NetworkPolicySpec(_PolicySpecBase):
    def _all_issues(self) -> list[tuple[Loc, str]]:
        return self._issues()

    @model_validator(mode="after")
    def _default_and_check(self) -> Self:
        self._apply_defaults()
        v.raise_issues(self._all_issues())
        return self


class GlobalNetworkPolicySpec(_PolicySpecBase):
    do_not_track: bool | None = None
    pre_dnat: bool | None = Field(default=None, alias="preDNAT")
    apply_on_forward: bool | None = None
    namespace_selector: str | None = Field(default=None, max_length=1024)

    GLOBAL: ClassVar[bool] = True

    @field_validator("namespace_selector")
    @classmethod
    def _ns_selector(cls, value: str | None) -> str | None:
        return v.validate_selector(value) if value else value

    def _global_issues(self) -> list[tuple[Loc, str]]:
        """Untracked and pre-DNAT policy only make sense in the raw/mangle hooks."""
        issues: list[tuple[Loc, str]] = []
        if self.do_not_track and self.pre_dnat:
            issues.append((("preDNAT",), "preDNAT and doNotTrack cannot both be true"))
        if self.pre_dnat and self.egress:
            issues.append((("egress",), "preDNAT policy cannot have any egress rules"))
        if self.pre_dnat and "Egress" in (self.types or []):
            issues.append((("types",), "preDNAT policy cannot have 'Egress' type"))
        if (self.do_not_track or self.pre_dnat) and not self.apply_on_forward:
            msg = "applyOnForward must be true if either preDNAT or doNotTrack is true"
            issues.append((("applyOnForward",), msg))
        return issues

    def _all_issues(self) -> list[tuple[Loc, str]]:
        return self._global_issues() + self._issues()

    @model_validator(mode="after")
    def _default_and_check(self) -> Self:
        self._apply_defaults()
        v.raise_issues(self._all_issues())
        return self


# --- Resources.


class TierSpec(CalicoModel):
    order: float | None = None
    default_action: Literal["Deny", "Pass"] | None = None

    _finite = field_validator("order")(v.finite_order)

    @property
    def effective_default_action(self) -> str:
        """What happens at the end of the tier when unset: Deny (upstream's documented default)."""
        return self.default_action or "Deny"


class TierStatus(CalicoModel):
    """Written by kube-controllers' tier controller (status subresource); users never set it."""

    conditions: list[Condition] | None = None


@register
class Tier(Resource):
    """An ordered group of policies; ``defaultAction`` applies when no policy in it decides."""

    KIND: ClassVar[str] = "Tier"

    spec: TierSpec = Field(default_factory=lambda: TierSpec())
    status: TierStatus | None = None

    @classmethod
    def name_problem(cls, name: str) -> str | None:
        # Tier names appear inside policy names and KDD labels: one DNS label, no dots.
        try:
            v.dns1123_label(name, "tier name")
        except ValueError as exc:
            return str(exc)
        return None

    @model_validator(mode="after")
    def _built_in_tier(self) -> Self:
        """Upstream's CRD rules pin the built-in tiers' order and defaultAction (an unset
        order counts as the default tier order, an unset action as Deny: the client's
        defaults are applied before the check, as upstream's DefaultTierFields)."""
        name = self.metadata.name
        if name not in BUILT_IN_TIERS:
            return self
        want_order, want_action = BUILT_IN_TIERS[name]
        order = BUILT_IN_TIERS["default"][0] if self.spec.order is None else self.spec.order
        issues: list[tuple[tuple[str, ...], str]] = []
        if self.spec.effective_default_action != want_action:
            issues.append(
                (
                    ("spec", "defaultAction"),
                    f"The '{name}' tier must have default action '{want_action}'",
                )
            )
        if order != want_order:
            issues.append((("spec", "order"), f"{name} tier order must be {want_order:.0f}"))
        if issues:
            v.raise_issues(issues)
        return self


@register
class NetworkPolicy(_PolicyResource):
    KIND: ClassVar[str] = "NetworkPolicy"
    NAME_PATTERN: ClassVar[re.Pattern[str]] = _NP_NAME
    NAME_WHAT: ClassVar[str] = "policy"

    spec: NetworkPolicySpec = Field(default_factory=lambda: NetworkPolicySpec())
    status: dict[str, Any] | None = None


@register
class GlobalNetworkPolicy(_PolicyResource):
    KIND: ClassVar[str] = "GlobalNetworkPolicy"
    NAME_PATTERN: ClassVar[re.Pattern[str]] = _GNP_NAME
    NAME_WHAT: ClassVar[str] = "global policy"

    spec: GlobalNetworkPolicySpec = Field(default_factory=lambda: GlobalNetworkPolicySpec())


# Defined in their own modules, imported on first use (kinds a reader may never meet).
_MOVED = {
    **dict.fromkeys(
        (
            "StagedNetworkPolicySpec",
            "StagedGlobalNetworkPolicySpec",
            "LabelSelectorRequirement",
            "LabelSelector",
            "IPBlock",
            "NetworkPolicyPeer",
            "NetworkPolicyPort",
            "NetworkPolicyIngressRule",
            "NetworkPolicyEgressRule",
            "StagedKubernetesNetworkPolicySpec",
            "StagedNetworkPolicy",
            "StagedGlobalNetworkPolicy",
            "StagedKubernetesNetworkPolicy",
        ),
        "calico.api.stagedpolicy",
    ),
    **dict.fromkeys(
        ("QoSAction", "QoSEntityRule", "QoSRule", "QoSPolicySpec", "QoSPolicy"), "calico.api.qos"
    ),
}


__getattr__ = moved_attributes(globals(), _MOVED)
