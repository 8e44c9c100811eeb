"""A stored IPPool read without pydantic, for Felix's start-up read (the encapsulation check
and the syncer); see ``leanpolicy`` for the contract: a plain shape accepted and converted
exactly as the processor would (``ipam.pool_output``), anything else None, for the processor
and its model to decide. ``tests/unit/model/test_lean_pool.py`` checks the two agree over
generated documents.
"""

from __future__ import annotations

import ipaddress
from typing import Any, NamedTuple

from calico.api import validators as v
from calico.model.processors.common import Output
from calico.model.processors.ipam import pool_output
from calico.model.processors.leanmeta import Decline, name_of, top
from calico.model.resources import ResourceKey

# IPPoolSpec's defaults and limits (calico.api.ipam), for the plain shape only.
_DEFAULT_BLOCK_SIZE = {4: 26, 6: 122}
_BLOCK_SIZE_RANGE = {4: (20, 32), 6: (116, 128)}
_LINK_LOCAL = {4: ipaddress.ip_network("169.254.0.0/16"), 6: ipaddress.ip_network("fe80::/10")}
_ENCAP = frozenset({"Never", "Always", "CrossSubnet"})
_USES = frozenset({"Workload", "Tunnel"})  # LoadBalancer pools: the model decides
_BOOLS = ("natOutgoing", "disabled", "disableBGPExport")
_SPEC = frozenset(
    {"cidr", "vxlanMode", "ipipMode", "blockSize", "nodeSelector", "allowedUses"}
    | {"assignmentMode", *_BOOLS}
)


class LeanPoolSpec(NamedTuple):
    """The fields of ``IPPoolSpec`` that ``ipam.pool_output`` reads."""

    cidr: str
    ipip_mode: str
    vxlan_mode: str
    nat_outgoing: bool
    disabled: bool
    disable_bgp_export: bool
    assignment_mode: str
    allowed_uses: list[str]


def lean_ip_pool(key: ResourceKey, value: Any) -> Output | None:
    """The processor's output for a plain stored IPPool, or None: validate through the model."""
    try:
        meta, spec = top(key, value, "IPPool", namespaced=False)
        v.dns1123_subdomain(name_of(key, meta))
        return pool_output(_spec(spec))
    except (Decline, ValueError):
        return None


def _spec(spec: dict[str, Any]) -> LeanPoolSpec:
    if not spec.keys() <= _SPEC:
        raise Decline
    cidr = spec.get("cidr")
    if type(cidr) is not str:
        raise Decline
    v.cidr(cidr, strict=True)
    net = ipaddress.ip_network(cidr)
    if net.overlaps(_LINK_LOCAL[net.version]):
        raise Decline
    ipip, vxlan = spec.get("ipipMode", "Never"), spec.get("vxlanMode", "Never")
    if type(ipip) is not str or ipip not in _ENCAP or type(vxlan) is not str or vxlan not in _ENCAP:
        raise Decline
    if ipip != "Never" and (net.version == 6 or vxlan != "Never"):
        raise Decline
    flags = {}
    for field in _BOOLS:
        flag = spec.get(field, False)
        if type(flag) is not bool:
            raise Decline
        flags[field] = flag
    block_size = spec.get("blockSize", 0)
    if type(block_size) is not int:
        raise Decline
    block_size = block_size or _DEFAULT_BLOCK_SIZE[net.version]
    low, high = _BLOCK_SIZE_RANGE[net.version]
    if not low <= block_size <= high or net.prefixlen > block_size:
        raise Decline
    if "nodeSelector" in spec:
        selector = spec["nodeSelector"]
        if type(selector) is not str:
            raise Decline
        try:
            v.selector_expression(selector)
        except Exception:
            raise Decline from None
    uses = spec.get("allowedUses", ["Workload", "Tunnel"])
    if type(uses) is not list or any(type(u) is not str or u not in _USES for u in uses):
        raise Decline
    if len(set(uses)) < len(uses):
        raise Decline
    mode = spec.get("assignmentMode", "Automatic")
    if mode not in ("Automatic", "Manual"):
        raise Decline
    return LeanPoolSpec(
        cidr=cidr,
        ipip_mode=ipip,
        vxlan_mode=vxlan,
        nat_outgoing=flags["natOutgoing"],
        disabled=flags["disabled"],
        disable_bgp_export=flags["disableBGPExport"],
        assignment_mode=mode,
        allowed_uses=uses,
    )
