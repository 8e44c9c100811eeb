"""IPAM kinds -> v1 keys: IPPool (Felix encap/routes, confd BIRD filters) and IPAMBlock (Felix
routes). BlockAffinity, confd's alone, is converted in ``affinity``."""

from __future__ import annotations

from typing import Any

from calico.model import values as v1
from calico.model.ipam_keys import BlockKey, IPPoolKey
from calico.model.processors.common import Output, decode, net_str
from calico.model.resources import ResourceKey

IPIP_INTERFACE = "tunl0"
_ENCAP_V1 = {"Always": "always", "CrossSubnet": "cross-subnet", "Never": "never"}


def _model(kind: str) -> Any:
    """The v3 model class of ``kind``, imported on first use: the lean pool reader
    (``leanpool``) builds values with :func:`pool_output` without pydantic."""
    from calico.api import ipam

    return getattr(ipam, kind)


def ip_pool(key: ResourceKey, value: Any) -> Output:
    return pool_output(decode(key, value, _model("IPPool")).spec)


def pool_output(spec: Any) -> Output:
    """model.IPPool from a validated spec (the model's or ``leanpool``'s view): encap modes in
    v1 spelling, ``ipip`` names the tunnel device when IPIP is on, ``ipam`` is "allocatable"
    (not disabled)."""
    cidr = net_str(spec.cidr)
    ipip_on = spec.ipip_mode in ("Always", "CrossSubnet")
    pool = v1.IPPool(
        cidr=cidr,
        ipip=IPIP_INTERFACE if ipip_on else "",
        ipip_mode=_ENCAP_V1[spec.ipip_mode],
        vxlan_mode=_ENCAP_V1[spec.vxlan_mode],
        masquerade=spec.nat_outgoing,
        ipam=not spec.disabled,
        disabled=spec.disabled,
        disable_bgp_export=spec.disable_bgp_export,
        assignment_mode=spec.assignment_mode,
        allowed_uses=tuple(spec.allowed_uses),
    )
    return {IPPoolKey(cidr): pool}


def ipam_block(key: ResourceKey, value: Any) -> Output:
    """The block's spec (already upstream's AllocationBlock field names) as a typed value."""
    spec = decode(key, value, _model("IPAMBlock")).spec
    block = v1.AllocationBlock.from_json({**spec.to_wire(), "cidr": net_str(spec.cidr)})
    return {BlockKey(block.cidr): block}
