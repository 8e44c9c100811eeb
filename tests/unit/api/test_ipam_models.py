"""IPPool, IPReservation, IPAMConfiguration and the allocator records (block/handle/affinity)."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from calico.api.base import Resource, resource_class
from calico.api.ipam import (
    BlockAffinity,
    IPAMBlock,
    IPAMConfiguration,
    IPAMHandle,
    IPPool,
    IPReservation,
)


def errors(cls: type[Resource], doc: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as info:
        cls.model_validate(doc)
    return [
        (".".join(str(p) for p in e["loc"]), e["msg"].removeprefix("Value error, "))
        for e in info.value.errors()
    ]


def pool(spec: dict[str, Any], name: str = "p") -> dict[str, Any]:
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": "IPPool",
        "metadata": {"name": name},
        "spec": spec,
    }


DOC_POOL = """
apiVersion: projectcalico.org/v3
kind: IPPool
metadata:
  name: my.ippool-1
spec:
  cidr: 10.1.0.0/16
  ipipMode: CrossSubnet
  natOutgoing: true
  disabled: false
  nodeSelector: all()
  allowedUses:
    - Workload
    - Tunnel
"""


def test_documented_pool_gets_defaults() -> None:
    p = IPPool.model_validate(yaml.safe_load(DOC_POOL))
    assert p.spec.block_size == 26
    assert p.spec.vxlan_mode == "Never"
    assert p.spec.assignment_mode == "Automatic"
    wire = p.to_wire()
    assert wire["spec"]["ipipMode"] == "CrossSubnet"
    assert wire["spec"]["natOutgoing"] is True
    assert wire["spec"]["blockSize"] == 26
    assert "ipip" not in wire["spec"] and "nat-outgoing" not in wire["spec"]
    assert IPPool.model_validate(wire) == p


def test_ipv6_pool_defaults() -> None:
    p = IPPool.model_validate(pool({"cidr": "2001:db8::/64", "vxlanMode": "Always"}))
    assert p.spec.block_size == 122
    assert p.spec.node_selector == "all()"
    assert p.spec.allowed_uses == ["Workload", "Tunnel"]


def test_aliases_and_registration() -> None:
    for alias in ("ippool", "ippools", "ipp", "ipps", "pool", "pools"):
        assert resource_class(alias) is IPPool
    assert resource_class("ipamconfig") is IPAMConfiguration
    assert resource_class("reservations") is IPReservation
    assert IPPool.PLURAL == "ippools" and not IPPool.NAMESPACED


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"cidr": "10.1.0.1/16"},
            ("spec.cidr", "'10.1.0.1/16' has host bits set; expected a network address"),
        ),
        ({"cidr": "10.1.0.0/33"}, ("spec.cidr", "'10.1.0.0/33' is not a valid CIDR")),
        (
            {"cidr": "169.254.0.0/24"},
            (
                "spec.cidr",
                "IP pool CIDR 169.254.0.0/24 overlaps with the link-local range 169.254.0.0/16",
            ),
        ),
        (
            {"cidr": "10.0.0.0/16", "blockSize": 19},
            ("spec.blockSize", "blockSize 19 is out of range 20-32 for an IPv4 pool"),
        ),
        (
            {"cidr": "fd00::/64", "blockSize": 112},
            ("spec.blockSize", "blockSize 112 is out of range 116-128 for an IPv6 pool"),
        ),
        (
            {"cidr": "10.0.0.0/28"},
            (
                "spec.cidr",
                "IP pool size is too small for use with Calico IPAM. It must be equal to or "
                "greater than the block size.",
            ),
        ),
        (
            {"cidr": "fd00::/64", "ipipMode": "Always"},
            ("spec.ipipMode", "IPIP is not supported on an IPv6 pool"),
        ),
        (
            {"cidr": "10.0.0.0/16", "ipipMode": "Always", "vxlanMode": "CrossSubnet"},
            ("spec.vxlanMode", "ipipMode and vxlanMode cannot both be enabled on the same pool"),
        ),
        (
            {"cidr": "10.0.0.0/16", "ipipMode": "always"},
            ("spec.ipipMode", "Input should be 'Never', 'Always' or 'CrossSubnet'"),
        ),
        (
            {"cidr": "10.0.0.0/16", "allowedUses": ["LoadBalancer", "Workload"]},
            (
                "spec.allowedUses",
                "allowedUses: LoadBalancer cannot be combined with Workload or Tunnel",
            ),
        ),
        (
            {"cidr": "10.0.0.0/16", "ipip": {"enabled": True}},
            ("spec.ipip", "ipip is a deprecated v1 field and must not be set; use ipipMode"),
        ),
        (
            {"cidr": "10.0.0.0/16", "nat-outgoing": True},
            (
                "spec.nat-outgoing",
                "nat-outgoing is a deprecated v1 field and must not be set; use natOutgoing",
            ),
        ),
        (
            {"cidr": "10.0.0.0/16", "natOutgiong": True},
            ("spec.natOutgiong", "Extra inputs are not permitted"),
        ),
    ],
)
def test_invalid_pools(spec: dict[str, Any], expected: tuple[str, str]) -> None:
    assert errors(IPPool, pool(spec)) == [expected]


def test_invalid_pool_name_and_selector() -> None:
    assert errors(IPPool, pool({"cidr": "10.0.0.0/16"}, name="Bad_Name")) == [
        (
            "metadata.name",
            "name 'Bad_Name' must be a DNS-1123 subdomain: at most 253 lower-case "
            "alphanumeric characters, '-' or '.', starting and ending with an alphanumeric "
            "character",
        )
    ]
    [(loc, msg)] = errors(IPPool, pool({"cidr": "10.0.0.0/16", "nodeSelector": "a ==="}))
    assert loc == "spec.nodeSelector" and "a ===" in msg


def test_end_to_end_through_io() -> None:
    io = pytest.importorskip("calico.api.io")
    [p] = io.load_documents(DOC_POOL)
    assert isinstance(p, IPPool)
    bad = DOC_POOL.replace("10.1.0.0/16", "fd00::/64")
    with pytest.raises(Exception) as info:
        io.load_documents(bad, source="pool.yaml")
    text = str(info.value)
    assert "IPPool(my.ippool-1)" in text and "IPIP is not supported on an IPv6 pool" in text
    assert "ipipMode" in text


@given(
    version=st.sampled_from([4, 6]),
    prefix=st.integers(min_value=0, max_value=128),
    block=st.integers(min_value=0, max_value=130),
)
def test_block_size_rules(version: int, prefix: int, block: int) -> None:
    bits = 32 if version == 4 else 128
    prefix = min(prefix, bits)
    base = "10.0.0.0" if version == 4 else "fd00::"
    net = ipaddress.ip_network(f"{base}/{prefix}", strict=False)
    if net.overlaps(ipaddress.ip_network("169.254.0.0/16" if version == 4 else "fe80::/10")):
        return
    low, high = (20, 32) if version == 4 else (116, 128)
    effective = block or (26 if version == 4 else 122)
    valid = low <= effective <= high and prefix <= effective
    doc = pool({"cidr": str(net), "blockSize": block})
    if valid:
        assert IPPool.model_validate(doc).spec.block_size == effective
    else:
        [(loc, _)] = errors(IPPool, doc)
        assert loc == ("spec.blockSize" if not low <= effective <= high else "spec.cidr")


def test_ip_reservation() -> None:
    doc = {
        "kind": "IPReservation",
        "metadata": {"name": "my-ipreservation-1"},
        "spec": {"reservedCIDRs": ["192.168.2.3", "10.0.2.3/32", "cafe:f00d::/123"]},
    }
    r = IPReservation.model_validate(doc)
    assert IPReservation.model_validate(r.to_wire()) == r
    assert r.to_wire()["spec"]["reservedCIDRs"][0] == "192.168.2.3"
    bad = {**doc, "spec": {"reservedCIDRs": ["10.0.0.0/8", "nonsense"]}}
    assert errors(IPReservation, bad) == [
        ("spec.reservedCIDRs.1", "'nonsense' is not a valid CIDR")
    ]
    dup = {**doc, "spec": {"reservedCIDRs": ["10.0.0.1", "10.0.0.1"]}}
    assert errors(IPReservation, dup) == [
        ("spec.reservedCIDRs", "reservedCIDRs must not contain duplicates")
    ]


def test_ipam_configuration() -> None:
    doc = {
        "kind": "IPAMConfiguration",
        "metadata": {"name": "default"},
        "spec": {"strictAffinity": True, "maxBlocksPerHost": 4},
    }
    c = IPAMConfiguration.model_validate(doc)
    assert c.spec.auto_allocate_blocks is True
    assert IPAMConfiguration.model_validate(c.to_wire()) == c
    assert errors(IPAMConfiguration, {**doc, "metadata": {"name": "other"}}) == [
        (
            "metadata.name",
            "IPAMConfiguration name 'other' is invalid: the only allowed name is 'default'",
        )
    ]
    assert errors(
        IPAMConfiguration, {**doc, "spec": {"strictAffinity": False, "autoAllocateBlocks": False}}
    ) == [
        (
            "spec.autoAllocateBlocks",
            "autoAllocateBlocks cannot be false when strictAffinity is false",
        )
    ]
    assert errors(IPAMConfiguration, {**doc, "spec": {"maxBlocksPerHost": 2}}) == [
        ("spec.maxBlocksPerHost", "maxBlocksPerHost can only be set when strictAffinity is true")
    ]
    assert errors(
        IPAMConfiguration, {**doc, "spec": {"strictAffinity": True, "maxBlocksPerHost": -1}}
    ) == [("spec.maxBlocksPerHost", "Input should be greater than or equal to 0")]


def block_doc(**spec: Any) -> dict[str, Any]:
    base = {
        "cidr": "10.0.0.0/30",
        "affinity": "host:node-1",
        "allocations": [0, None, 1, None],
        "unallocated": [1, 3],
        "attributes": [
            {"handle_id": "k8s-pod-network.abc", "secondary": {"namespace": "default", "pod": "a"}},
            {"handle_id": "ipip-tunnel-addr-node-1"},
        ],
        "sequenceNumber": 7,
        "sequenceNumberForAllocation": {"0": 3, "2": 6},
    }
    base.update(spec)
    return {"kind": "IPAMBlock", "metadata": {"name": "10-0-0-0-30"}, "spec": base}


def test_ipam_block() -> None:
    b = IPAMBlock.model_validate(block_doc())
    wire = b.to_wire()
    assert wire["spec"]["allocations"] == [0, None, 1, None]
    assert wire["spec"]["attributes"][0]["handle_id"] == "k8s-pod-network.abc"
    assert wire["spec"]["sequenceNumberForAllocation"] == {"0": 3, "2": 6}
    assert IPAMBlock.model_validate(wire) == b
    assert errors(IPAMBlock, block_doc(affinity="node-1")) == [
        ("spec.affinity", "String should match pattern '^(host|virtual):[a-zA-Z0-9\\.\\-_]+$'")
    ]
    assert errors(IPAMBlock, block_doc(allocations=[0])) == [
        ("spec.allocations", "allocations has 1 entries; a 10.0.0.0/30 block needs 4")
    ]
    assert errors(IPAMBlock, block_doc(unallocated=[4])) == [
        ("spec.unallocated.0", "ordinal 4 is outside the block (0-3)")
    ]
    assert errors(IPAMBlock, block_doc(allocations=[0, None, 5, None])) == [
        ("spec.allocations.2", "attribute index 5 does not exist (the block has 2 attributes)")
    ]


def test_ipam_handle_and_affinity() -> None:
    h = IPAMHandle.model_validate(
        {
            "kind": "IPAMHandle",
            "metadata": {"name": "k8s-pod-network.abc"},
            "spec": {"handleID": "k8s-pod-network.abc", "block": {"10.0.0.0/26": 1}},
        }
    )
    assert h.to_wire()["spec"] == {
        "handleID": "k8s-pod-network.abc",
        "block": {"10.0.0.0/26": 1},
        "deleted": False,
    }
    assert IPAMHandle.model_validate(h.to_wire()) == h
    with pytest.raises(ValidationError):
        IPAMHandle.model_validate({"metadata": {"name": "x"}, "spec": {"block": {}}})
    a_doc = {
        "kind": "BlockAffinity",
        "metadata": {"name": "node-1-10-0-0-0-26"},
        "spec": {
            "state": "confirmed",
            "node": "node-1",
            "cidr": "10.0.0.0/26",
            "deleted": "false",
            "type": "host",
        },
    }
    a = BlockAffinity.model_validate(a_doc)
    assert a.spec.deleted is False
    assert BlockAffinity.model_validate(a.to_wire()) == a
    bad = {**a_doc, "spec": {**a_doc["spec"], "state": "claimed"}}
    assert errors(BlockAffinity, bad) == [
        ("spec.state", "Input should be '', 'confirmed', 'pending' or 'pendingDeletion'")
    ]
