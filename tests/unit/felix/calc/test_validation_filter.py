"""ValidationFilter: invalid values become deletions, logged once per episode."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from calico.felix.calc.validation_filter import ValidationFilter
from calico.model import (
    GlobalConfigKey,
    HostEndpointKey,
    NetworkSetKey,
    PolicyKey,
    ProfileLabelsKey,
    ProfileRulesKey,
    TierKey,
    WorkloadEndpointKey,
)

WEP = WorkloadEndpointKey("h", "k8s", "ns/p", "eth0")
POL = PolicyKey("GlobalNetworkPolicy", "", "p")


def run(key: Any, value: Any, **kw: Any) -> Any:
    out: list[tuple[Any, Any]] = []
    ValidationFilter(lambda k, v: out.append((k, v)), **kw).on_update(key, value)
    ((k, v),) = out
    assert k == key
    return v


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (WEP, {"name": "cali1", "ipv4_nets": ["10.0.0.1/32"], "labels": {"a": "b"}}),
        (HostEndpointKey("h", "e"), {"name": "eth0", "expected_ipv4_addrs": ["10.0.0.1"]}),
        (POL, {"selector": "a == 'b'", "order": 1, "types": ["ingress"], "inbound_rules": []}),
        (ProfileRulesKey("p"), {"inbound_rules": [{"action": "next-tier", "src_ports": ["x"]}]}),
        (ProfileLabelsKey("p"), {"a": "b"}),
        (TierKey("t"), {"order": 5, "defaultAction": "Pass"}),
        (NetworkSetKey("n"), {"nets": ["10.0.0.0/8"], "labels": {}}),
        (GlobalConfigKey("LogSeverityScreen"), "anything at all"),
    ],
)
def test_valid_values_pass_unchanged(key: Any, value: Any) -> None:
    assert run(key, value) is value


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (WEP, {"name": "", "ipv4_nets": ["10.0.0.1/32"]}),
        (WEP, {"name": "c", "ipv4_nets": ["not-a-cidr"]}),
        (WEP, {"name": "c", "labels": {"a": 1}}),
        (WEP, {"name": "c", "allow_spoofed_source_ips": ["10.0.0.0/8"]}),
        (HostEndpointKey("h", "e"), {"expected_ipv4_addrs": ["10.0.0.0/8"]}),
        (POL, {"selector": "a =="}),
        (POL, {"selector": "", "types": ["sideways"]}),
        (POL, {"inbound_rules": [{"action": "explode"}]}),
        (POL, {"inbound_rules": [{"action": "allow", "dst_ports": ["1:99999"]}]}),
        (POL, {"outbound_rules": [{"action": "allow", "!dst_selector": "((("}]}),
        (ProfileLabelsKey("p"), ["not", "a", "map"]),
        (TierKey("t"), {"defaultAction": "Allow"}),
        (NetworkSetKey("n"), {"nets": ["300.0.0.0/8"]}),
    ],
)
def test_invalid_values_become_deletions(key: Any, value: Any) -> None:
    assert run(key, value) is None


def test_spoofing_allowed_when_configured() -> None:
    value = {"name": "c", "allow_spoofed_source_ips": ["10.0.0.0/8"]}
    assert run(WEP, value, workload_source_spoofing="Any") is value


def test_logged_once_per_invalid_episode(caplog: pytest.LogCaptureFixture) -> None:
    out: list[Any] = []
    filt = ValidationFilter(lambda k, v: out.append(v))
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            filt.on_update(POL, {"selector": "a =="})
        assert len(caplog.records) == 1
        filt.on_update(POL, {"selector": "a == 'b'"})
        filt.on_update(POL, {"selector": "a =="})
        assert len(caplog.records) == 2
    assert out == [None, None, None, {"selector": "a == 'b'"}, None]
