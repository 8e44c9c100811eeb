"""Felix-facing v1 keys: config, hosts and their endpoints, policy, tiers, profiles, network sets.

Only the fields upstream escapes are escaped (workload/host endpoint IDs, orchestrator and
workload IDs, profile, tier and network-set names); hostnames and config names are written
verbatim. Config names may span several segments (``prefix/sub``); everything else is one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from calico.model.base import Key, cached_hash, esc, seg, tail
from calico.model.escaping import InvalidKeyError

#: Segment 4 of ``/calico/v1/policy/<x>/...`` values that are not policy kinds.
RESERVED_POLICY_SEGMENTS = frozenset({"tier", "profile"})
_set = object.__setattr__


@cached_hash
@dataclass(frozen=True, slots=True)
class ReadyFlagKey(Key):
    """The datastore-ready flag (``ClusterInformation.datastoreReady``)."""

    LEADING_SLASH_REQUIRED: ClassVar[bool] = True

    def default_path(self) -> str:
        return "/calico/v1/Ready"


@cached_hash
@dataclass(frozen=True, slots=True)
class GlobalConfigKey(Key):
    """One global Felix config field (from FelixConfiguration ``default`` or ClusterInformation)."""

    name: str

    def default_path(self) -> str:
        return f"/calico/v1/config/{tail(self, 'name', self.name)}"


@cached_hash
@dataclass(frozen=True, slots=True)
class HostConfigKey(Key):
    """One per-host Felix config field (FelixConfiguration ``node.<host>``, Node tunnel addrs)."""

    hostname: str
    name: str

    def default_path(self) -> str:
        host = seg(self, "hostname", self.hostname)
        return f"/calico/v1/host/{host}/config/{tail(self, 'name', self.name)}"


@cached_hash
@dataclass(frozen=True, slots=True)
class WorkloadEndpointKey(Key):
    """A workload endpoint; ``workload_id`` is ``<namespace>/<pod>`` for Kubernetes."""

    hostname: str
    orchestrator_id: str
    workload_id: str
    endpoint_id: str

    def __post_init__(self) -> None:
        """The checks rendering ``default_path`` makes (every field non-empty, no ``/`` in
        the unescaped hostname), without rendering it: a key is built per endpoint at every
        Felix start. Anything else renders the path, which raises the precise error."""
        host, orch, workload, endpoint = (
            self.hostname,
            self.orchestrator_id,
            self.workload_id,
            self.endpoint_id,
        )
        if (
            type(host) is str
            and type(orch) is str
            and type(workload) is str
            and type(endpoint) is str
            and host
            and orch
            and workload
            and endpoint
            and "/" not in host
        ):
            _set(self, "_hash", hash((host, orch, workload, endpoint)))  # cached_hash's answer
            return
        self.default_path()

    def default_path(self) -> str:
        return (
            f"/calico/v1/host/{seg(self, 'hostname', self.hostname)}"
            f"/workload/{esc(self, 'orchestrator_id', self.orchestrator_id)}"
            f"/{esc(self, 'workload_id', self.workload_id)}"
            f"/endpoint/{esc(self, 'endpoint_id', self.endpoint_id)}"
        )


@cached_hash
@dataclass(frozen=True, slots=True)
class HostEndpointKey(Key):
    """A host endpoint, filed under the node it belongs to."""

    hostname: str
    endpoint_id: str

    def default_path(self) -> str:
        host = seg(self, "hostname", self.hostname)
        return f"/calico/v1/host/{host}/endpoint/{esc(self, 'endpoint_id', self.endpoint_id)}"


@cached_hash
@dataclass(frozen=True, slots=True)
class HostMetadataKey(Key):
    """A host's metadata (addresses, labels, AS number)."""

    hostname: str

    def default_path(self) -> str:
        return f"/calico/v1/host/{seg(self, 'hostname', self.hostname)}/metadata"


@cached_hash
@dataclass(frozen=True, slots=True)
class WireguardKey(Key):
    """A node's WireGuard interface address and public key."""

    node_name: str

    def default_path(self) -> str:
        return f"/calico/v1/host/{seg(self, 'node_name', self.node_name)}/wireguard"


@cached_hash
@dataclass(frozen=True, slots=True)
class PolicyKey(Key):
    """A policy of any v3 policy kind; cluster-scoped kinds have ``namespace == ""``."""

    kind: str
    namespace: str
    name: str

    def default_path(self) -> str:
        kind = seg(self, "kind", self.kind)
        if kind in RESERVED_POLICY_SEGMENTS:
            raise InvalidKeyError(f"PolicyKey: kind {kind!r} collides with the {kind} paths")
        if "/" in self.namespace:
            raise InvalidKeyError(f"PolicyKey: namespace {self.namespace!r} must not contain '/'")
        return f"/calico/v1/policy/{kind}/{self.namespace}/{seg(self, 'name', self.name)}"


@cached_hash
@dataclass(frozen=True, slots=True)
class TierKey(Key):
    """A tier's metadata (order, default action)."""

    name: str

    def default_path(self) -> str:
        return f"/calico/v1/policy/tier/{esc(self, 'name', self.name)}/metadata"


@cached_hash
@dataclass(frozen=True, slots=True)
class ProfileRulesKey(Key):
    """A profile's rules; paired with ``ProfileLabelsKey`` for the same profile."""

    name: str

    def default_path(self) -> str:
        return f"/calico/v1/policy/profile/{esc(self, 'name', self.name)}/rules"


@cached_hash
@dataclass(frozen=True, slots=True)
class ProfileLabelsKey(Key):
    """The labels a profile gives to the endpoints that use it."""

    name: str

    def default_path(self) -> str:
        return f"/calico/v1/policy/profile/{esc(self, 'name', self.name)}/labels"


@cached_hash
@dataclass(frozen=True, slots=True)
class NetworkSetKey(Key):
    """A network set: ``<ns>/<name>`` for namespaced NetworkSets, ``<name>`` for global ones."""

    name: str

    def default_path(self) -> str:
        return f"/calico/v1/netset/{esc(self, 'name', self.name)}"
