"""The host addresses explain reads from Node resources: every address field, CIDR or bare,
IPv4 and IPv6 spellings canonicalised; junk skipped; one owner per address or a clear error."""

from __future__ import annotations

import ipaddress
import json
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.policyeval.nodeaddrs import NodeAddresses, node_addresses

PREFIX = "/calico/resources/v3/projectcalico.org/nodes/"

V4 = st.builds(ipaddress.IPv4Address, st.integers(0, 2**32 - 1))
V6 = st.builds(ipaddress.IPv6Address, st.integers(0, 2**128 - 1))


def _node(**spec: object) -> dict:
    return {"kind": "Node", "metadata": {"name": "n"}, "spec": spec}


@given(v4=V4, v6=V6, plen=st.integers(0, 32), exploded=st.booleans())
def test_every_field_is_read_whatever_the_spelling(
    v4: ipaddress.IPv4Address, v6: ipaddress.IPv6Address, plen: int, exploded: bool
) -> None:
    six = v6.exploded if exploded else str(v6)
    raw = _node(
        bgp={"ipv4Address": f"{v4}/{plen}", "ipv6Address": f"{six}/64",
             "ipv4IPIPTunnelAddr": str(v4)},
        ipv4VXLANTunnelAddr=str(v4),
        ipv6VXLANTunnelAddr=six,
        wireguard={"interfaceIPv4Address": str(v4), "interfaceIPv6Address": six},
        addresses=[{"address": f"{v4}/{plen}", "type": "InternalIP"}, {"address": six}],
    )  # fmt: skip
    assert node_addresses(raw) == [
        (v4, "spec.bgp.ipv4Address"),
        (v6, "spec.bgp.ipv6Address"),
        (v4, "spec.bgp.ipv4IPIPTunnelAddr"),
        (v4, "spec.ipv4VXLANTunnelAddr"),
        (v6, "spec.ipv6VXLANTunnelAddr"),
        (v4, "spec.wireguard.interfaceIPv4Address"),
        (v6, "spec.wireguard.interfaceIPv6Address"),
        (v4, "spec.addresses"),
        (v6, "spec.addresses"),
    ]


@pytest.mark.parametrize(
    "raw",
    [
        {},
        {"spec": None},
        {"spec": "x"},
        _node(bgp="10.0.0.1"),
        _node(bgp={"ipv4Address": 17}),
        _node(bgp={"ipv4Address": "10.0.0.300/24"}),
        _node(ipv4VXLANTunnelAddr=""),
        _node(addresses=["10.0.0.1"]),  # not the {address: ...} form
        _node(addresses=[{"address": None}]),
        _node(addresses="10.0.0.1"),
    ],
)
def test_malformed_fields_are_skipped(raw: dict) -> None:
    assert node_addresses(raw) == []


def _kv(name: str, raw: object) -> SimpleNamespace:
    text = raw if isinstance(raw, str) else json.dumps(raw)
    return SimpleNamespace(key=PREFIX + name, value=text)


def test_owner_is_the_one_node_listing_it() -> None:
    kvs = [
        _kv("node1", _node(bgp={"ipv4Address": "192.168.0.1/24"}, ipv4VXLANTunnelAddr="10.0.0.1")),
        _kv("node2", _node(addresses=[{"address": "192.168.0.2"}, {"address": "10.9.9.9"}])),
        _kv("node3", _node(addresses=[{"address": "10.9.9.9"}])),
        _kv("bad", "{not json"),
        _kv("a/b", _node(ipv4VXLANTunnelAddr="10.7.7.7")),  # not a Node key
        SimpleNamespace(key="/other/x", value=json.dumps(_node(ipv4VXLANTunnelAddr="10.8.8.8"))),
    ]
    nodes = NodeAddresses.from_kvs(PREFIX, kvs)
    ip = ipaddress.ip_address
    assert nodes.owner(ip("192.168.0.1")) == ("node1", "spec.bgp.ipv4Address")
    assert nodes.owner(ip("10.0.0.1")) == ("node1", "spec.ipv4VXLANTunnelAddr")
    assert nodes.owner(ip("192.168.0.2")) == ("node2", "spec.addresses")
    assert nodes.owner(ip("192.168.0.3")) is None
    assert nodes.owner(ip("10.7.7.7")) is None and nodes.owner(ip("10.8.8.8")) is None
    with pytest.raises(
        ValueError, match=r"^address 10.9.9.9 is listed by several nodes: node2, node3$"
    ):
        nodes.owner(ip("10.9.9.9"))
    # one node listing an address twice owns it once (its first field)
    twice = NodeAddresses.from_kvs(
        PREFIX,
        [_kv("n", _node(bgp={"ipv4Address": "10.1.1.1/32"}, ipv4VXLANTunnelAddr="10.1.1.1"))],
    )
    assert twice.owner(ip("10.1.1.1")) == ("n", "spec.bgp.ipv4Address")
