"""kube-controllers' run config: the ``default`` KubeControllersConfiguration merged with the
environment (design/kube-controllers.md "Configuration").

Upstream (``pkg/config/runconfig.go``) starts from the resource's spec and lets a few
variables override it: ``ENABLED_CONTROLLERS`` (which controllers run at all),
``RECONCILER_PERIOD``, ``COMPACTION_PERIOD``, ``HEALTH_ENABLED``, ``SYNC_NODE_LABELS``,
``AUTO_HOST_ENDPOINTS`` and ``LOG_LEVEL``. The variables that took effect are recorded in the
resource's ``status.environmentVars``, the merged result in ``status.runningConfig``; a change
to the merged result restarts the process (exit 129). On the Kubernetes datastore label sync is
forced off (the backend derives Calico node labels itself).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from calico.api.kubecontrollers import (
    AutoHostEndpointConfig,
    ControllersConfig,
    KubeControllersConfigurationSpec,
    LoadBalancerControllerConfig,
    NodeControllerConfig,
    PolicyMigratorConfig,
    ReconcilerConfig,
)
from calico.durations import format_duration, parse_duration

DEFAULT_RECONCILER_PERIOD = "5m"
DEFAULT_LEAK_GRACE_PERIOD = "15m"
DEFAULT_COMPACTION_PERIOD = "10m"
DEFAULT_METRICS_PORT = 9094

#: ENABLED_CONTROLLERS tokens -> the controller they enable ("profile" is the old name).
CONTROLLER_TOKENS = {
    "node": "node",
    "workloadendpoint": "workloadendpoint",
    "profile": "namespace",
    "namespace": "namespace",
    "policy": "policy",
    "serviceaccount": "serviceaccount",
    "loadbalancer": "loadbalancer",
}


class ConfigError(ValueError):
    """A variable or resource field kube-controllers cannot run with (fatal upstream)."""


def default_spec() -> KubeControllersConfigurationSpec:
    """What upstream writes when ``default`` does not exist."""
    period = DEFAULT_RECONCILER_PERIOD
    return KubeControllersConfigurationSpec(
        log_severity_screen="Info",
        health_checks="Enabled",
        etcd_v3_compaction_period=DEFAULT_COMPACTION_PERIOD,
        prometheus_metrics_port=DEFAULT_METRICS_PORT,
        controllers=ControllersConfig(
            node=NodeControllerConfig(
                reconciler_period=period,
                sync_labels="Enabled",
                host_endpoint=AutoHostEndpointConfig(auto_create="Disabled"),
                leak_grace_period=DEFAULT_LEAK_GRACE_PERIOD,
            ),
            policy=ReconcilerConfig(reconciler_period=period),
            workload_endpoint=ReconcilerConfig(reconciler_period=period),
            service_account=ReconcilerConfig(reconciler_period=period),
            namespace=ReconcilerConfig(reconciler_period=period),
            load_balancer=LoadBalancerControllerConfig(assign_ips="AllServices"),
            policy_migration=PolicyMigratorConfig(enabled="Enabled"),
        ),
    )


@dataclass(frozen=True)
class RunConfig:
    """The merged configuration; equality decides whether a change needs a restart."""

    log_level: str = "info"
    health_enabled: bool = True
    compaction_period: float = 600.0
    metrics_port: int = 0
    debug_profile_port: int = 0
    controllers: frozenset[str] = frozenset()
    reconciler_periods: tuple[tuple[str, float], ...] = ()
    sync_labels: bool = True
    auto_host_endpoints: bool = False
    leak_grace_period: float = 900.0
    assign_ips: str = "AllServices"
    env_used: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def reconciler_period(self, controller: str) -> float:
        return dict(self.reconciler_periods).get(controller, 300.0)


def _duration(text: str | None, default: str, where: str) -> float:
    try:
        return parse_duration(text if text else default)
    except ValueError as exc:
        raise ConfigError(f"invalid {where} {text!r}: {exc}") from None


def _bool(text: str, name: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "1", "t", "yes", "enabled"):
        return True
    if low in ("false", "0", "f", "no", "disabled"):
        return False
    raise ConfigError(f"invalid {name} {text!r}: expected true or false")


def parse_enabled(text: str) -> frozenset[str]:
    out: set[str] = set()
    for token in (t.strip() for t in text.split(",")):
        if not token:
            continue
        if token == "flannelmigration":
            raise ConfigError("the flannelmigration controller is not implemented")
        if token not in CONTROLLER_TOKENS:
            raise ConfigError(f"invalid controller {token!r} in ENABLED_CONTROLLERS")
        out.add(CONTROLLER_TOKENS[token])
    return frozenset(out)


_SECTIONS = {
    "node": "node",
    "policy": "policy",
    "workloadendpoint": "workload_endpoint",
    "serviceaccount": "service_account",
    "namespace": "namespace",
    "loadbalancer": "load_balancer",
}


def resolve(
    spec: KubeControllersConfigurationSpec, env: Mapping[str, str], datastore_type: str
) -> RunConfig:
    """Merge ``env`` over ``spec``. Raises ConfigError for values upstream would refuse."""
    used: dict[str, str] = {}

    def var(name: str) -> str | None:
        value = env.get(name, "").strip()
        if value:
            used[name] = value
            return value
        return None

    ctrl = spec.controllers
    enabled_text = var("ENABLED_CONTROLLERS")
    if enabled_text is not None:
        enabled = parse_enabled(enabled_text)
    else:
        enabled = frozenset(k for k, attr in _SECTIONS.items() if getattr(ctrl, attr) is not None)
    period_override = var("RECONCILER_PERIOD")
    periods: list[tuple[str, float]] = []
    for name in sorted(enabled):
        section = getattr(ctrl, _SECTIONS[name])
        text = period_override or getattr(section, "reconciler_period", None)
        if name != "loadbalancer":
            periods.append((name, _duration(text, DEFAULT_RECONCILER_PERIOD, "reconcilerPeriod")))
    node = ctrl.node or NodeControllerConfig()
    sync_labels = (node.sync_labels or "Enabled") == "Enabled"
    text = var("SYNC_NODE_LABELS")
    if text is not None:
        sync_labels = _bool(text, "SYNC_NODE_LABELS")
    if datastore_type == "kubernetes":
        sync_labels = False
        used["DATASTORE_TYPE"] = "kubernetes"
    hep = node.host_endpoint or AutoHostEndpointConfig()
    auto_hep = (hep.auto_create or "Disabled") == "Enabled"
    text = var("AUTO_HOST_ENDPOINTS")
    if text is not None:
        if text.lower() not in ("enabled", "disabled"):
            raise ConfigError(f"invalid AUTO_HOST_ENDPOINTS {text!r}: expected enabled or disabled")
        auto_hep = text.lower() == "enabled"
    health = (spec.health_checks or "Enabled") == "Enabled"
    text = var("HEALTH_ENABLED")
    if text is not None:
        health = _bool(text, "HEALTH_ENABLED")
    compaction = var("COMPACTION_PERIOD") or spec.etcd_v3_compaction_period
    level = var("LOG_LEVEL") or spec.log_severity_screen or "Info"
    lb = ctrl.load_balancer or LoadBalancerControllerConfig()
    return RunConfig(
        log_level=level.lower(),
        health_enabled=health,
        compaction_period=_duration(compaction, DEFAULT_COMPACTION_PERIOD, "compaction period"),
        metrics_port=spec.prometheus_metrics_port or 0,
        debug_profile_port=spec.debug_profile_port or 0,
        controllers=enabled,
        reconciler_periods=tuple(periods),
        sync_labels=sync_labels,
        auto_host_endpoints=auto_hep,
        leak_grace_period=_duration(
            node.leak_grace_period, DEFAULT_LEAK_GRACE_PERIOD, "leakGracePeriod"
        ),
        assign_ips=lb.assign_ips or "AllServices",
        env_used=tuple(sorted(used.items())),
    )


def running_spec(rc: RunConfig) -> KubeControllersConfigurationSpec:
    """``status.runningConfig``: the merged config in the resource's own shape."""
    periods = dict(rc.reconciler_periods)

    def rec(name: str) -> ReconcilerConfig | None:
        if name not in rc.controllers:
            return None
        return ReconcilerConfig(reconciler_period=format_duration(periods[name]))

    node = None
    if "node" in rc.controllers:
        node = NodeControllerConfig(
            reconciler_period=format_duration(periods["node"]),
            sync_labels="Enabled" if rc.sync_labels else "Disabled",
            host_endpoint=AutoHostEndpointConfig(
                auto_create="Enabled" if rc.auto_host_endpoints else "Disabled"
            ),
            leak_grace_period=format_duration(rc.leak_grace_period),
        )
    return KubeControllersConfigurationSpec(
        log_severity_screen=rc.log_level.capitalize(),  # type: ignore[arg-type]
        health_checks="Enabled" if rc.health_enabled else "Disabled",
        etcd_v3_compaction_period=format_duration(rc.compaction_period),
        prometheus_metrics_port=rc.metrics_port or None,
        debug_profile_port=rc.debug_profile_port or None,
        controllers=ControllersConfig(
            node=node,
            policy=rec("policy"),
            workload_endpoint=rec("workloadendpoint"),
            service_account=rec("serviceaccount"),
            namespace=rec("namespace"),
            load_balancer=(
                LoadBalancerControllerConfig(assign_ips=rc.assign_ips)  # type: ignore[arg-type]
                if "loadbalancer" in rc.controllers
                else None
            ),
        ),
    )
