"""IPAM kinds -> v1 keys: IPPool (Felix encap/routes, confd BIRD filters), IPAMBlock (Felix
routes) and BlockAffinity (confd's per-node block aggregation)."""

from __future__ import annotations

from typing import Any

from calico.api.ipam import BlockAffinity, IPAMBlock, IPPool
from calico.model.ipam_keys import BlockAffinityKey, BlockKey, IPPoolKey
from calico.model.processors.common import Output, decode, net_str

IPIP_INTERFACE = "tunl0"
_ENCAP_V1 = {"Always": "always", "CrossSubnet": "cross-subnet", "Never": "never"}


def ip_pool(path: str, value: Any) -> Output:
    """model.IPPool JSON: encap modes in v1 spelling, ``ipip`` names the tunnel device when
    IPIP is on, ``ipam`` is "allocatable" (not disabled)."""
    _, res = decode(path, value, IPPool)
    spec = res.spec
    cidr = net_str(spec.cidr)
    ipip_on = spec.ipip_mode in ("Always", "CrossSubnet")
    out = {
        "cidr": cidr,
        "ipip": IPIP_INTERFACE if ipip_on else "",
        "ipip_mode": _ENCAP_V1[spec.ipip_mode],
        "vxlan_mode": _ENCAP_V1[spec.vxlan_mode],
        "masquerade": spec.nat_outgoing,
        "ipam": not spec.disabled,
        "disabled": spec.disabled,
        "disableBGPExport": spec.disable_bgp_export,
        "assignment_mode": spec.assignment_mode,
        "allowed_uses": list(spec.allowed_uses),
    }
    return {IPPoolKey(cidr).default_path(): out}


def ipam_block(path: str, value: Any) -> Output:
    """The block's spec as stored (already upstream's AllocationBlock field names)."""
    _, res = decode(path, value, IPAMBlock)
    block = res.spec.to_wire()
    block["cidr"] = net_str(res.spec.cidr)
    return {BlockKey(block["cidr"]).default_path(): block}


def block_affinity(path: str, value: Any) -> Output:
    """``{state, deleted}`` under the host's affinity key. Pending claims are not sent: confd
    must not advertise a block the host may yet fail to claim."""
    _, res = decode(path, value, BlockAffinity)
    spec = res.spec
    if spec.state == "pending":
        return {}
    key = BlockAffinityKey(spec.node, spec.cidr)
    return {key.default_path(): {"state": spec.state, "deleted": spec.deleted}}
