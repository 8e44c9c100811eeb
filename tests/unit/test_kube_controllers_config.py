"""kube-controllers' merged run config: resource spec + upstream's environment overrides."""

from __future__ import annotations

import pytest

from calico.api.cluster import KubeControllersConfigurationSpec
from calico.kube_controllers.config import (
    ConfigError,
    default_spec,
    parse_enabled,
    resolve,
    running_spec,
)


def test_defaults_enable_every_section_of_the_default_resource() -> None:
    rc = resolve(default_spec(), {}, "etcdv3")
    assert rc.controllers == {
        "node",
        "policy",
        "workloadendpoint",
        "serviceaccount",
        "namespace",
        "loadbalancer",
    }
    assert rc.reconciler_period("node") == 300.0
    assert rc.leak_grace_period == 900.0
    assert rc.compaction_period == 600.0
    assert rc.metrics_port == 9094
    assert (rc.sync_labels, rc.auto_host_endpoints, rc.health_enabled) == (True, False, True)
    assert rc.env_used == ()


def test_enabled_controllers_selects_and_profile_is_namespace() -> None:
    rc = resolve(default_spec(), {"ENABLED_CONTROLLERS": "node, profile,,policy"}, "etcdv3")
    assert rc.controllers == {"node", "namespace", "policy"}
    assert rc.env_used == (("ENABLED_CONTROLLERS", "node, profile,,policy"),)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("node,bogus", "invalid controller 'bogus' in ENABLED_CONTROLLERS"),
        ("Node", "invalid controller 'Node'"),
        ("flannelmigration", "flannelmigration controller is not implemented"),
    ],
)
def test_bad_enabled_controllers(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_enabled(text)


def test_env_overrides_and_kdd_forces_label_sync_off() -> None:
    env = {
        "RECONCILER_PERIOD": "1m30s",
        "COMPACTION_PERIOD": "0s",
        "HEALTH_ENABLED": "false",
        "SYNC_NODE_LABELS": "true",
        "AUTO_HOST_ENDPOINTS": "Enabled",
        "LOG_LEVEL": "debug",
    }
    rc = resolve(default_spec(), env, "etcdv3")
    assert rc.reconciler_period("policy") == 90.0
    assert rc.compaction_period == 0.0
    assert rc.health_enabled is False
    assert rc.sync_labels is True
    assert rc.auto_host_endpoints is True
    assert rc.log_level == "debug"
    kdd = resolve(default_spec(), env, "kubernetes")
    assert kdd.sync_labels is False
    assert ("DATASTORE_TYPE", "kubernetes") in kdd.env_used


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"HEALTH_ENABLED": "maybe"}, "invalid HEALTH_ENABLED 'maybe'"),
        ({"AUTO_HOST_ENDPOINTS": "true"}, "expected enabled or disabled"),
        ({"RECONCILER_PERIOD": "5 minutes"}, "invalid reconcilerPeriod"),
    ],
)
def test_bad_env_values(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve(default_spec(), env, "etcdv3")


def test_equality_ignores_which_variables_said_it() -> None:
    spec = default_spec()
    a = resolve(spec, {}, "etcdv3")
    b = resolve(spec, {"HEALTH_ENABLED": "true"}, "etcdv3")
    assert a == b  # same merged config: no restart
    changed = spec.model_copy(deep=True)
    assert changed.controllers.node is not None
    changed.controllers.node.leak_grace_period = "1m"
    assert resolve(changed, {}, "etcdv3") != a


def test_empty_spec_runs_nothing_and_running_spec_round_trips() -> None:
    rc = resolve(KubeControllersConfigurationSpec(), {}, "etcdv3")
    assert rc.controllers == frozenset()
    full = resolve(default_spec(), {"ENABLED_CONTROLLERS": "node,policy"}, "etcdv3")
    spec = running_spec(full)
    assert spec.controllers.node is not None and spec.controllers.policy is not None
    assert spec.controllers.namespace is None
    again = resolve(spec, {}, "etcdv3")
    assert again == full
