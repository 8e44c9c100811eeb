"""Typed v1 model values: what the syncers, the Typha cache and the calc graph carry.

Frozen, slotted dataclasses mirroring upstream's ``libcalico-go/lib/backend/model`` structs,
each with ``to_json``/``from_json`` giving exactly upstream's v1 JSON. See design/model.md.

The names resolve on first use (module ``__getattr__``): each value module defines dozens of
dataclasses, whose generated methods cost ~1 ms a class to create, and a reader of policies
(``calicoctl explain``) should not pay for the IPAM, BGP and host values or the key registry
(design/performance.md "Imports").
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from calico.model.values.bgp import BGPPeer
    from calico.model.values.codec import V1Value, ValueJSONError
    from calico.model.values.endpoints import (
        IPNAT,
        EndpointPort,
        HostEndpoint,
        NetworkSet,
        ProfileLabels,
        WorkloadEndpoint,
    )
    from calico.model.values.hosts import HostMetadata, Wireguard
    from calico.model.values.ipam import (
        AllocationAttribute,
        AllocationBlock,
        BlockAffinity,
        IPPool,
    )
    from calico.model.values.policy import (
        HTTPMatch,
        HTTPPath,
        Policy,
        ProfileRules,
        Rule,
        RuleMetadata,
        Tier,
    )
    from calico.model.values.registry import (
        SCALAR_TYPES,
        VALUE_CLASSES,
        decode_value,
        encode_value,
    )

# name -> the submodule defining it
_HOMES = {
    "BGPPeer": "bgp",
    "V1Value": "codec",
    "ValueJSONError": "codec",
    "IPNAT": "endpoints",
    "EndpointPort": "endpoints",
    "HostEndpoint": "endpoints",
    "NetworkSet": "endpoints",
    "ProfileLabels": "endpoints",
    "WorkloadEndpoint": "endpoints",
    "HostMetadata": "hosts",
    "Wireguard": "hosts",
    "AllocationAttribute": "ipam",
    "AllocationBlock": "ipam",
    "BlockAffinity": "ipam",
    "IPPool": "ipam",
    "HTTPMatch": "policy",
    "HTTPPath": "policy",
    "Policy": "policy",
    "ProfileRules": "policy",
    "Rule": "policy",
    "RuleMetadata": "policy",
    "Tier": "policy",
    "SCALAR_TYPES": "registry",
    "VALUE_CLASSES": "registry",
    "decode_value": "registry",
    "encode_value": "registry",
}

__all__ = [
    "IPNAT",
    "SCALAR_TYPES",
    "VALUE_CLASSES",
    "AllocationAttribute",
    "AllocationBlock",
    "BGPPeer",
    "BlockAffinity",
    "EndpointPort",
    "HTTPMatch",
    "HTTPPath",
    "HostEndpoint",
    "HostMetadata",
    "IPPool",
    "NetworkSet",
    "Policy",
    "ProfileLabels",
    "ProfileRules",
    "Rule",
    "RuleMetadata",
    "Tier",
    "V1Value",
    "ValueJSONError",
    "Wireguard",
    "WorkloadEndpoint",
    "decode_value",
    "encode_value",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
