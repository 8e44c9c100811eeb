"""IPPool, IPAMBlock and BlockAffinity processors."""

from __future__ import annotations

from typing import Any

from processor_json import at_path

from calico.model import processors as p

block_affinity = at_path(p.block_affinity)
ip_pool = at_path(p.ip_pool)
ipam_block = at_path(p.ipam_block)

V3 = "/calico/resources/v3/projectcalico.org/"


def res(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def test_ip_pool_ipip() -> None:
    spec = {"cidr": "10.65.0.0/16", "ipipMode": "CrossSubnet", "natOutgoing": True}
    assert ip_pool(V3 + "ippools/p1", res("IPPool", "p1", spec)) == {
        "/calico/v1/ipam/v4/pool/10.65.0.0-16": {
            "cidr": "10.65.0.0/16",
            "ipip": "tunl0",
            "ipip_mode": "cross-subnet",
            "vxlan_mode": "never",
            "masquerade": True,
            "ipam": True,
            "disabled": False,
            "disableBGPExport": False,
            "assignment_mode": "Automatic",
            "allowed_uses": ["Workload", "Tunnel"],
        }
    }


def test_ip_pool_v6_vxlan_disabled() -> None:
    spec = {"cidr": "fd00:10::/64", "vxlanMode": "Always", "disabled": True}
    out = ip_pool(V3 + "ippools/p6", res("IPPool", "p6", spec))
    value = out["/calico/v1/ipam/v6/pool/fd00:10::-64"]
    assert value["ipip"] == ""
    assert value["ipip_mode"] == "never"
    assert value["vxlan_mode"] == "always"
    assert (value["ipam"], value["disabled"]) == (False, True)


def test_ipam_block() -> None:
    spec = {
        "cidr": "10.65.1.0/26",
        "affinity": "host:node1",
        "allocations": [0] + [None] * 63,
        "unallocated": list(range(1, 64)),
        "attributes": [{"handle_id": "h1", "secondary": {"node": "node1"}}],
    }
    out = ipam_block(V3 + "ipamblocks/10-65-1-0-26", res("IPAMBlock", "10-65-1-0-26", spec))
    value = out["/calico/ipam/v2/assignment/ipv4/block/10.65.1.0-26"]
    assert value["cidr"] == "10.65.1.0/26"
    assert value["affinity"] == "host:node1"
    assert value["allocations"][:2] == [0, None]
    assert value["attributes"] == [{"handle_id": "h1", "secondary": {"node": "node1"}}]


def test_block_affinity_confirmed_and_pending() -> None:
    spec = {"state": "confirmed", "node": "node1", "cidr": "10.65.1.0/26", "deleted": False}
    path = V3 + "blockaffinities/node1-10-65-1-0-26"
    assert block_affinity(path, res("BlockAffinity", "node1-10-65-1-0-26", spec)) == {
        "/calico/ipam/v2/host/node1/ipv4/block/10.65.1.0-26": {
            "state": "confirmed",
            "deleted": False,
        }
    }
    spec["state"] = "pending"
    assert block_affinity(path, res("BlockAffinity", "node1-10-65-1-0-26", spec)) == {}
