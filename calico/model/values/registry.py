"""Which value type each key type carries, and the JSON boundary codec built on it.

``encode_value``/``decode_value`` are the only place a typed value becomes upstream's v1 JSON
and back: the datastore-facing syncer code, the Typha wire and confd's key space use them;
everything in between passes the typed values. Config and BGP config keys carry plain strings,
the Ready flag a boolean, a ResourceKey the v3 resource itself (``calico.api``).
"""

from __future__ import annotations

from typing import Any

from calico.model.base import Key
from calico.model.bgp_keys import (
    GlobalBGPConfigKey,
    GlobalBGPPeerKey,
    NodeBGPConfigKey,
    NodeBGPPeerKey,
)
from calico.model.ipam_keys import BlockAffinityKey, BlockKey, IPPoolKey
from calico.model.keys import (
    GlobalConfigKey,
    HostConfigKey,
    HostEndpointKey,
    HostMetadataKey,
    NetworkSetKey,
    PolicyKey,
    ProfileLabelsKey,
    ProfileRulesKey,
    ReadyFlagKey,
    TierKey,
    WireguardKey,
    WorkloadEndpointKey,
)
from calico.model.resources import ResourceKey
from calico.model.v3_resources import decode_resource
from calico.model.values.bgp import BGPPeer
from calico.model.values.codec import V1Value, ValueJSONError
from calico.model.values.endpoints import (
    HostEndpoint,
    NetworkSet,
    ProfileLabels,
    WorkloadEndpoint,
)
from calico.model.values.hosts import HostMetadata, Wireguard
from calico.model.values.ipam import AllocationBlock, BlockAffinity, IPPool
from calico.model.values.policy import Policy, ProfileRules, Tier

#: Key type -> the V1Value class of its values.
VALUE_CLASSES: dict[type[Key], type[V1Value]] = {
    WorkloadEndpointKey: WorkloadEndpoint,
    HostEndpointKey: HostEndpoint,
    HostMetadataKey: HostMetadata,
    WireguardKey: Wireguard,
    PolicyKey: Policy,
    TierKey: Tier,
    ProfileRulesKey: ProfileRules,
    ProfileLabelsKey: ProfileLabels,
    NetworkSetKey: NetworkSet,
    IPPoolKey: IPPool,
    BlockKey: AllocationBlock,
    BlockAffinityKey: BlockAffinity,
    GlobalBGPPeerKey: BGPPeer,
    NodeBGPPeerKey: BGPPeer,
}
#: Key types whose values are plain JSON scalars.
SCALAR_TYPES: dict[type[Key], type] = {
    ReadyFlagKey: bool,
    GlobalConfigKey: str,
    HostConfigKey: str,
    GlobalBGPConfigKey: str,
    NodeBGPConfigKey: str,
}


class _ScalarCodec:
    """A plain JSON scalar (config strings, the Ready flag)."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def check(self, key: Key, value: Any, verb: str) -> Any:
        if not isinstance(value, self.cls):
            raise ValueJSONError(f"{type(key).__name__} {verb} a {self.cls.__name__}: {value!r}")
        return value

    def encode(self, key: Key, value: Any) -> Any:
        return self.check(key, value, "carries")

    def decode(self, key: Key, data: Any) -> Any:
        return self.check(key, data, "expected")


class _ValueCodec:
    """A V1Value dataclass."""

    def __init__(self, cls: type[V1Value]) -> None:
        self.cls = cls

    def encode(self, key: Key, value: Any) -> Any:
        if not isinstance(value, self.cls):
            raise ValueJSONError(f"{type(key).__name__} carries {self.cls.__name__}: {value!r}")
        return value.to_json()

    def decode(self, key: Key, data: Any) -> Any:
        return self.cls.from_json(data)


#: Native Kubernetes kinds the Felix syncer passes through as the API's JSON (Kubernetes
#: datastore; no v3 model): the value is that dict, on the wire too.
RAW_KUBERNETES_KINDS = frozenset({"KubernetesService", "KubernetesEndpointSlice"})


class _ResourceCodec:
    """A ResourceKey's value: the v3 resource (the JSON is its wire form), or for the raw
    Kubernetes kinds the object's JSON itself."""

    def encode(self, key: Key, value: Any) -> Any:
        if isinstance(key, ResourceKey) and key.kind in RAW_KUBERNETES_KINDS:
            if not isinstance(value, dict):
                raise ValueJSONError(f"{key.kind} carries a JSON object: {value!r}")
            return value
        return value.to_wire()

    def decode(self, key: Key, data: Any) -> Any:
        assert isinstance(key, ResourceKey)
        if key.kind in RAW_KUBERNETES_KINDS:
            if not isinstance(data, dict):
                raise ValueJSONError(f"{key.kind} expected a JSON object: {data!r}")
            return data
        try:
            return decode_resource(key, data)
        except ValueError as exc:
            raise ValueJSONError(str(exc)) from None


_CODECS: dict[type[Key], Any] = {
    **{k: _ValueCodec(c) for k, c in VALUE_CLASSES.items()},
    **{k: _ScalarCodec(t) for k, t in SCALAR_TYPES.items()},
    ResourceKey: _ResourceCodec(),
}


def _codec(key: Key) -> Any:
    codec = _CODECS.get(type(key))
    if codec is None:
        raise ValueJSONError(f"{type(key).__name__} has no v1 value type")
    return codec


def encode_value(key: Key, value: Any) -> Any:
    """A typed value as upstream's v1 JSON (None stays None: a deletion)."""
    return None if value is None else _codec(key).encode(key, value)


def decode_value(key: Key, data: Any) -> Any:
    """Upstream's v1 JSON for ``key`` as its typed value; ValueJSONError if malformed."""
    return None if data is None else _codec(key).decode(key, data)
