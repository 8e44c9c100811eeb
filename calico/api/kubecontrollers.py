"""KubeControllersConfiguration: which kube-controllers run and how (a singleton named
``default``). Only kube-controllers and calicoctl read it, so it lives apart from
``calico.api.cluster`` and a Felix start never defines its ~10 models."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field

from calico.api import validators as v
from calico.api.base import CalicoModel, SingletonResource, register
from calico.api.fieldtypes import Duration, Selector

EnabledDisabled = Literal["Enabled", "Disabled"]


def _regexp(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{value!r} is not a valid regular expression: {exc}") from None
    return value


class AutoHostEndpointTemplate(CalicoModel):
    """Which host endpoints the node controller creates automatically, and how to name them."""

    generate_name: (
        Annotated[str, Field(max_length=253), AfterValidator(v.dns1123_subdomain)] | None
    ) = None
    interface_cidrs: list[Annotated[str, AfterValidator(v.cidr)]] | None = Field(
        default=None, alias="interfaceCIDRs"
    )
    interface_pattern: Annotated[str, AfterValidator(_regexp)] | None = None
    labels: Annotated[dict[str, str], AfterValidator(v.label_map)] | None = None
    node_selector: Selector | None = None


class AutoHostEndpointConfig(CalicoModel):
    auto_create: EnabledDisabled | None = None
    create_default_host_endpoint: str | None = None
    templates: list[AutoHostEndpointTemplate] | None = None


class NodeControllerConfig(CalicoModel):
    reconciler_period: Duration | None = None
    sync_labels: EnabledDisabled | None = None
    host_endpoint: AutoHostEndpointConfig | None = None
    leak_grace_period: Duration | None = None


class ReconcilerConfig(CalicoModel):
    """Controllers whose only tunable is how often they resync."""

    reconciler_period: Duration | None = None


class LoadBalancerControllerConfig(CalicoModel):
    assign_ips: Literal["AllServices", "RequestedServicesOnly"] | None = Field(
        default=None, alias="assignIPs"
    )


class PolicyMigratorConfig(CalicoModel):
    enabled: EnabledDisabled | None = None


class ControllersConfig(CalicoModel):
    """A controller runs when its section is present."""

    node: NodeControllerConfig | None = None
    policy: ReconcilerConfig | None = None
    workload_endpoint: ReconcilerConfig | None = None
    service_account: ReconcilerConfig | None = None
    namespace: ReconcilerConfig | None = None
    load_balancer: LoadBalancerControllerConfig | None = None
    policy_migration: PolicyMigratorConfig | None = None


class KubeControllersConfigurationSpec(CalicoModel):
    log_severity_screen: (
        Literal["None", "Debug", "Info", "Warning", "Error", "Fatal", "Panic"] | None
    ) = None
    health_checks: EnabledDisabled | None = None
    etcd_v3_compaction_period: Duration | None = Field(default=None, alias="etcdV3CompactionPeriod")
    prometheus_metrics_port: Annotated[int, Field(ge=0, le=65535)] | None = None
    debug_profile_port: Annotated[int, Field(ge=0, le=65535)] | None = None
    controllers: ControllersConfig = Field(default_factory=ControllersConfig)


class KubeControllersConfigurationStatus(CalicoModel):
    """What kube-controllers is actually running with (spec merged with its env)."""

    running_config: KubeControllersConfigurationSpec | None = None
    environment_vars: dict[str, str] | None = None


@register
class KubeControllersConfiguration(SingletonResource):
    KIND: ClassVar[str] = "KubeControllersConfiguration"

    kind: str = "KubeControllersConfiguration"
    spec: KubeControllersConfigurationSpec = Field(default_factory=KubeControllersConfigurationSpec)
    status: KubeControllersConfigurationStatus | None = None
