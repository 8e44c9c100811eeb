"""Typed v1 model values: what the syncers, the Typha cache and the calc graph carry.

Frozen, slotted dataclasses mirroring upstream's ``libcalico-go/lib/backend/model`` structs,
each with ``to_json``/``from_json`` giving exactly upstream's v1 JSON. See design/model.md.
"""

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
from calico.model.values.ipam import AllocationAttribute, AllocationBlock, BlockAffinity, IPPool
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
