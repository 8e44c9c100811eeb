"""Default-pool environment parsing, validation and creation rules."""

from __future__ import annotations

import ipaddress

import pytest

from calico.api import parse_resource
from calico.datastore.client import Client
from calico.node.errors import NodeError
from calico.node.pools import (
    default_ipv4_cidr,
    ensure_default_pools,
    env_bool,
    generate_ipv6_ula,
    plan_default_pools,
)


def spec_of(plan, version: int):  # type: ignore[no-untyped-def]
    for pool in plan.pools:
        if ipaddress.ip_network(pool.spec.cidr).version == version:
            return pool.metadata.name, pool.spec
    return None


def test_defaults() -> None:
    plan = plan_default_pools({})
    name, v4 = spec_of(plan, 4)
    assert name == "default-ipv4-ippool"
    assert (v4.cidr, v4.block_size, v4.nat_outgoing) == ("192.168.0.0/16", 26, True)
    assert (v4.ipip_mode, v4.vxlan_mode, v4.node_selector) == ("Never", "Never", "all()")
    name6, v6 = spec_of(plan, 6)
    assert name6 == "default-ipv6-ippool"
    assert v6.block_size == 122 and v6.nat_outgoing is False
    assert ipaddress.ip_network(v6.cidr).prefixlen == 48 and v6.cidr.startswith("fd")


def test_tunables() -> None:
    env = {
        "CALICO_IPV4POOL_CIDR": "10.10.1.1/16",
        "CALICO_IPV4POOL_BLOCK_SIZE": "28",
        "CALICO_IPV4POOL_IPIP": "CrossSubnet",
        "CALICO_IPV4POOL_NAT_OUTGOING": "no",
        "CALICO_IPV4POOL_NODE_SELECTOR": "has(bgp)",
        "CALICO_IPV6POOL_CIDR": "fd01::/64",
        "CALICO_IPV6POOL_VXLAN": "always",
        "CALICO_IPV6POOL_NAT_OUTGOING": "true",
    }
    plan = plan_default_pools(env)
    _, v4 = spec_of(plan, 4)
    assert (v4.cidr, v4.block_size, v4.ipip_mode, v4.nat_outgoing) == (
        "10.10.0.0/16",
        28,
        "CrossSubnet",
        False,
    )
    assert v4.node_selector == "has(bgp)"
    _, v6 = spec_of(plan, 6)
    assert (v6.cidr, v6.vxlan_mode, v6.nat_outgoing) == ("fd01::/64", "Always", True)


def test_none_disables_a_family_and_no_ipv6_support() -> None:
    plan = plan_default_pools({"CALICO_IPV4POOL_CIDR": "none"})
    assert spec_of(plan, 4) is None and spec_of(plan, 6) is not None
    assert spec_of(plan_default_pools({}, v6_supported=False), 6) is None
    assert spec_of(plan_default_pools({"CALICO_IPV6POOL_CIDR": "none"}), 6) is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CALICO_IPV4POOL_CIDR": "10.0.0.0/33"}, "Invalid CIDR specified in CALICO_IPV4POOL_CIDR"),
        ({"CALICO_IPV4POOL_CIDR": "fd00::/64"}, "Invalid CIDR specified in CALICO_IPV4POOL_CIDR"),
        ({"CALICO_IPV6POOL_CIDR": "10.0.0.0/8"}, "Invalid CIDR specified in CALICO_IPV6POOL_CIDR"),
        ({"CALICO_IPV4POOL_BLOCK_SIZE": "19"}, "Invalid blocksize 19 for version 4"),
        ({"CALICO_IPV4POOL_BLOCK_SIZE": "x"}, "Unable to convert blocksize"),
        ({"CALICO_IPV6POOL_BLOCK_SIZE": "129"}, "Invalid blocksize 129 for version 6"),
        ({"CALICO_IPV4POOL_IPIP": "sometimes"}, "Unrecognized IPIP mode"),
        ({"CALICO_IPV6POOL_VXLAN": "bad"}, "Unrecognized VXLAN mode specified in CALICO_IPV6"),
        ({"CALICO_IPV4POOL_NODE_SELECTOR": "has("}, "Invalid node selector"),
        (
            {"CALICO_IPV4POOL_IPIP": "Always", "CALICO_IPV4POOL_VXLAN": "Always"},
            "cannot both be enabled",
        ),
        (
            {"CALICO_IPV4POOL_CIDR": "10.0.0.0/28", "CALICO_IPV4POOL_BLOCK_SIZE": "26"},
            "IP pool size is too small",
        ),
        (
            {"NO_DEFAULT_POOLS": "true", "CALICO_IPV4POOL_CIDR": "10.0.0.0/16"},
            "NO_DEFAULT_POOLS",
        ),
    ],
)
def test_invalid_settings(env: dict[str, str], message: str) -> None:
    with pytest.raises(NodeError, match=message):
        plan_default_pools(env)


def test_no_default_pools() -> None:
    plan = plan_default_pools({"NO_DEFAULT_POOLS": "TRUE"})
    assert plan.skipped and plan.pools == ()


def test_default_v4_avoids_host_addresses() -> None:
    assert default_ipv4_cidr([]) == "192.168.0.0/16"
    host = [ipaddress.IPv4Address("192.168.1.10"), ipaddress.IPv4Address("172.16.0.1")]
    assert default_ipv4_cidr(host) == "172.17.0.0/16"


def test_env_bool() -> None:
    assert env_bool({}, "X", True) is True
    assert env_bool({"X": "F"}, "X", True) is False
    assert env_bool({"X": "anything"}, "X", False) is True


def test_ula_is_random_fd_48() -> None:
    a, b = generate_ipv6_ula(), generate_ipv6_ula()
    assert a != b and a.startswith("fd") and a.endswith("::/48")


def test_existing_pool_of_a_family_blocks_its_default(client: Client) -> None:
    client.create(
        parse_resource(
            {
                "apiVersion": "projectcalico.org/v3",
                "kind": "IPPool",
                "metadata": {"name": "mine"},
                "spec": {"cidr": "10.5.0.0/16"},
            }
        )
    )
    created = ensure_default_pools(client, plan_default_pools({}))
    assert created == ["default-ipv6-ippool"]
    assert ensure_default_pools(client, plan_default_pools({})) == []
    names = sorted(p.metadata.name for p in client.list("IPPool").items)
    assert names == ["default-ipv6-ippool", "mine"]
