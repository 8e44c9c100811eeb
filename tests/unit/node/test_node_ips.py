"""Node address configuration from IP/IP6 and the conflict check."""

from __future__ import annotations

from typing import Any

import pytest
from node_helpers import iface

from calico.api import parse_resource
from calico.node.errors import NodeError
from calico.node.node_ips import AutodetectFailed, configure_ips, conflicts

HOST = [iface("lo", "127.0.0.1/8", index=1), iface("eth0", "10.0.0.5/24", "fd00::5/64", index=2)]


def run(env: dict[str, str], spec: dict[str, Any] | None = None) -> tuple[dict[str, Any], Any]:
    spec = spec if spec is not None else {}
    return spec, configure_ips(spec, env, lambda: HOST)


def test_autodetect_when_unset_and_new() -> None:
    spec, res = run({})
    assert spec["bgp"] == {"ipv4Address": "10.0.0.5/24"}
    assert res.changed and res.ip_changed
    assert "interfaces" not in spec


def test_unset_keeps_existing_address() -> None:
    spec, res = run({}, {"bgp": {"ipv4Address": "10.0.0.5/24"}})
    assert not res.changed and spec["bgp"]["ipv4Address"] == "10.0.0.5/24"


def test_explicit_ip_gets_host_prefix_and_interfaces() -> None:
    spec, _ = run({"IP": "10.0.0.5"})
    assert spec["bgp"]["ipv4Address"] == "10.0.0.5/24"
    assert spec["interfaces"] == [{"name": "eth0", "addresses": ["10.0.0.5"]}]


def test_explicit_ip_not_on_host_becomes_host_route() -> None:
    spec, _ = run({"IP": "10.9.9.9"})
    assert spec["bgp"]["ipv4Address"] == "10.9.9.9/32"


def test_ipv6_only_on_request() -> None:
    spec, _ = run({"IP6": "autodetect"})
    assert spec["bgp"]["ipv6Address"] == "fd00::5/64"
    spec, _ = run({})
    assert "ipv6Address" not in spec["bgp"]


def test_none_keeps_existing() -> None:
    spec, _ = run({"IP": "none", "IP6": "autodetect"}, {"bgp": {"ipv4Address": "10.1.1.1/24"}})
    assert spec["bgp"]["ipv4Address"] == "10.1.1.1/24"
    assert spec["bgp"]["ipv6Address"] == "fd00::5/64"


def test_invalid_explicit_address() -> None:
    with pytest.raises(NodeError, match="not contain a valid IPv4 address: IP=fd00::1"):
        run({"IP": "fd00::1"})


def test_autodetect_failure_without_previous_value() -> None:
    with pytest.raises(AutodetectFailed, match="failed to autodetect an IPv4 address"):
        run({"IP_AUTODETECTION_METHOD": "interface=wlan0"})


def test_autodetect_failure_keeps_previous_value() -> None:
    spec, res = run(
        {"IP": "autodetect", "IP_AUTODETECTION_METHOD": "interface=wlan0"},
        {"bgp": {"ipv4Address": "10.0.0.5/24"}},
    )
    assert spec["bgp"]["ipv4Address"] == "10.0.0.5/24" and not res.ip_changed


def test_networking_backend_none_skips() -> None:
    spec, res = run({"CALICO_NETWORKING_BACKEND": "none"})
    assert spec == {} and not res.changed


def test_invalid_method_is_fatal() -> None:
    with pytest.raises(NodeError, match="Invalid IP autodetection method: nope"):
        run({"IP_AUTODETECTION_METHOD": "nope"})


def _node(name: str, v4: str | None = None, v6: str | None = None) -> Any:
    bgp = {k: v for k, v in (("ipv4Address", v4), ("ipv6Address", v6)) if v}
    return parse_resource(
        {
            "apiVersion": "projectcalico.org/v3",
            "kind": "Node",
            "metadata": {"name": name},
            "spec": {"bgp": bgp} if bgp else {},
        }
    )


def test_conflicts() -> None:
    spec = {"bgp": {"ipv4Address": "10.0.0.5/24", "ipv6Address": "fd00::5/64"}}
    others = [_node("me", "10.0.0.4/24"), _node("a", "10.0.0.6/24"), _node("b", v6="fd00::5/120")]
    assert conflicts("me", spec, others) == {6: "b"}
    assert conflicts("me", spec, [_node("c", "10.0.0.5/32"), _node("d")]) == {4: "c"}
    assert conflicts("me", spec, [_node("me", "10.0.0.5/24")]) == {}
