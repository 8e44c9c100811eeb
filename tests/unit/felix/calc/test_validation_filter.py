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
from calico.model import values as v1
from calico.model.values import ValueJSONError, decode_value

WEP = WorkloadEndpointKey("h", "k8s", "ns/p", "eth0")
POL = PolicyKey("GlobalNetworkPolicy", "", "p")


def run(key: Any, value: Any, **kw: Any) -> Any:
    out: list[tuple[Any, Any]] = []
    ValidationFilter(lambda k, v: out.append((k, v)), **kw).on_update(key, value)
    ((k, v),) = out
    assert k == key
    return v


def typed(key: Any, data: Any) -> Any:
    """A value written in upstream's v1 JSON, decoded as the syncer would carry it."""
    return decode_value(key, data)


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
    value = typed(key, value)
    assert run(key, value) is value


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (WEP, {"name": "", "ipv4_nets": ["10.0.0.1/32"]}),
        (WEP, {"name": "c", "ipv4_nets": ["not-a-cidr"]}),
        (WEP, {"name": "c", "allow_spoofed_source_ips": ["10.0.0.0/8"]}),
        (HostEndpointKey("h", "e"), {"expected_ipv4_addrs": ["10.0.0.0/8"]}),
        (POL, {"selector": "a =="}),
        (POL, {"selector": "", "types": ["sideways"]}),
        (POL, {"inbound_rules": [{"action": "explode"}]}),
        (POL, {"inbound_rules": [{"action": "allow", "dst_ports": ["1:99999"]}]}),
        (POL, {"outbound_rules": [{"action": "allow", "!dst_selector": "((("}]}),
        (TierKey("t"), {"defaultAction": "Allow"}),
        (NetworkSetKey("n"), {"nets": ["300.0.0.0/8"]}),
    ],
)
def test_invalid_values_become_deletions(key: Any, value: Any) -> None:
    assert run(key, typed(key, value)) is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (WEP, {"name": "c", "labels": {"a": 1}}),
        (ProfileLabelsKey("p"), ["not", "a", "map"]),
        (POL, {"order": "first"}),
        (WEP, {"name": "c", "ports": [{"name": "http", "port": "80"}]}),
        (POL, {"inbound_rules": [{"action": "allow", "dst_ports": [True]}]}),
    ],
)
def test_wrongly_typed_json_is_refused_by_the_decoder(key: Any, value: Any) -> None:
    with pytest.raises(ValueJSONError):
        typed(key, value)


def test_value_of_the_wrong_class_becomes_a_deletion() -> None:
    assert run(POL, v1.Tier(order=1)) is None
    assert run(WEP, {"name": "cali1"}) is None  # an undecoded dict is not a value


def test_spoofing_allowed_when_configured() -> None:
    value = typed(WEP, {"name": "c", "allow_spoofed_source_ips": ["10.0.0.0/8"]})
    assert run(WEP, value, workload_source_spoofing="Any") is value


def test_logged_once_per_invalid_episode(caplog: pytest.LogCaptureFixture) -> None:
    out: list[Any] = []
    filt = ValidationFilter(lambda k, v: out.append(v))
    bad, good = v1.Policy(selector="a =="), v1.Policy(selector="a == 'b'")
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            filt.on_update(POL, bad)
        assert len(caplog.records) == 1
        filt.on_update(POL, good)
        filt.on_update(POL, bad)
        assert len(caplog.records) == 2
    assert out == [None, None, None, good, None]


@pytest.mark.parametrize(
    ("labels", "reason"),
    [
        ({"a": "x", "b": 1}, "labels: non-string entry 'b'"),
        ({2: "x"}, "labels: non-string entry 2"),
        (["a"], "labels is not an object"),
    ],
)
def test_bad_endpoint_labels_name_the_entry(
    labels: Any, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The label check's messages (built only on failure) name what was wrong."""
    value = v1.WorkloadEndpoint(name="cali1", labels=labels)
    with caplog.at_level(logging.WARNING):
        assert run(WEP, value) is None
    assert any(reason in r.getMessage() for r in caplog.records), caplog.text
