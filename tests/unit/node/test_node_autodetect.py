"""Autodetection methods against a fake host."""

from __future__ import annotations

import pytest
from node_helpers import iface

from calico.node import autodetect as ad
from calico.node.errors import NodeError

HOST = [
    iface("lo", "127.0.0.1/8", "::1/128", index=1),
    iface("eth0", "10.0.0.5/24", "fe80::1/64", "2001:db8::5/64", index=2),
    iface("eth1", "172.16.1.9/16", index=3),
    iface("docker0", "172.17.0.1/16", index=4),
    iface("cali123", "10.9.9.9/32", index=5),
    iface("eth2", "169.254.3.3/16", index=6),
]


def detect(method: str, version: int = 4, host: list | None = None, **kw: object) -> str | None:
    found = ad.autodetect(method, version, lambda: host if host is not None else HOST, **kw)  # type: ignore[arg-type]
    return None if found is None else str(found)


def test_first_found_scans_from_the_last_interface_and_skips_excluded() -> None:
    # eth2 only has a link-local address; cali*/docker* are excluded; eth1 comes before eth0.
    assert detect("") == "172.16.1.9/16"
    assert detect("first-found") == "172.16.1.9/16"


def test_first_found_ipv6_skips_link_local() -> None:
    assert detect("first-found", 6) == "2001:db8::5/64"


@pytest.mark.parametrize(
    "name",
    ["docker0", "cbr0", "dummy0", "podman1", "virbr0", "lxcbr0", "veth12", "lo", "br-abc",
     "cali1", "tunl0", "flannel.1", "kube-ipvs0", "cni0", "vxlan.calico", "vxlan-v6.calico",
     "wireguard.cali", "wg-v6.cali", "nodelocaldns"],
)  # fmt: skip
def test_default_exclusions(name: str) -> None:
    assert detect("first-found", host=[iface(name, "10.1.1.1/24")]) is None


def test_interface_regexes() -> None:
    assert detect("interface=eth0") == "10.0.0.5/24"
    assert detect("interface=nope, eth0") == "10.0.0.5/24"
    # interface= does not apply the default exclusions.
    assert detect("interface=docker.*") == "172.17.0.1/16"
    assert detect("interface=wlan.*") is None


def test_skip_interface_adds_to_exclusions() -> None:
    assert detect("skip-interface=eth1") == "10.0.0.5/24"
    assert detect("skip-interface=eth1,eth0") is None


def test_cidr_method() -> None:
    assert detect("cidr=10.0.0.0/24") == "10.0.0.5/24"
    # cidr= does not apply the default exclusions either (cali123 comes later, so first).
    assert detect("cidr=10.0.0.0/8") == "10.9.9.9/32"
    assert detect("cidr=192.168.0.0/16, 172.16.0.0/16") == "172.16.1.9/16"
    assert detect("cidr=2001:db8::/32", 6) == "2001:db8::5/64"
    assert detect("cidr=bogus") is None


def test_can_reach_uses_the_source_address_and_interface_prefix() -> None:
    seen = []

    def reach(dest: str, version: int) -> str:
        seen.append((dest, version))
        return "10.0.0.5"

    assert detect("can-reach=8.8.8.8", reach=reach) == "10.0.0.5/24"
    assert seen == [("8.8.8.8", 4)]
    assert detect("can-reach=x", reach=lambda d, v: "10.99.0.1") is None


def test_can_reach_real_socket_on_loopback() -> None:
    assert ad.udp_reach("127.0.0.1", 4) == "127.0.0.1"


@pytest.mark.parametrize("method", ["bogus", "interfaces=eth0", "First-Found"])
def test_invalid_method(method: str) -> None:
    with pytest.raises(NodeError, match=f"Invalid IP autodetection method: {method}"):
        detect(method)


def test_kubernetes_internal_ip_needs_kubernetes() -> None:
    assert detect("kubernetes-internal-ip") is None


def test_local_cidr_adds_prefix_from_host() -> None:
    assert ad.local_cidr("10.0.0.5", 4, HOST) == "10.0.0.5/24"
    assert ad.local_cidr("10.0.0.5/16", 4, HOST) == "10.0.0.5/16"
    assert ad.local_cidr("10.7.7.7", 4, HOST) == "10.7.7.7"


def test_filter_keeps_family_only() -> None:
    got = ad.filter_interfaces(HOST, ["eth0"], (), 6)
    assert [str(c) for c in got[0].cidrs] == ["fe80::1/64", "2001:db8::5/64"]
