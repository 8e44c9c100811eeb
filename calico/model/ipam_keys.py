"""IP pool and IPAM keys: pools, allocation blocks, block affinities, handles.

CIDR fields accept a string or a network object and are stored masked to the network
(``10.0.0.1/8`` becomes ``10.0.0.0/8``), so two keys naming the same network are equal and the
path is canonical. The IP version in the path comes from the CIDR, never from a separate field.
"""

from __future__ import annotations

from dataclasses import dataclass

from calico.model.base import Key, cached_hash, seg
from calico.model.escaping import IPNetwork, cidr_segment, to_network


@cached_hash
@dataclass(frozen=True, slots=True)
class IPPoolKey(Key):
    """A v1 IP pool (``/calico/v1/ipam/v4|v6/pool/<cidr>``)."""

    cidr: IPNetwork

    def __post_init__(self) -> None:
        object.__setattr__(self, "cidr", to_network(self.cidr))
        Key.__post_init__(self)

    def default_path(self) -> str:
        return f"/calico/v1/ipam/v{self.cidr.version}/pool/{cidr_segment(self.cidr)}"


@cached_hash
@dataclass(frozen=True, slots=True)
class BlockKey(Key):
    """An IPAM allocation block."""

    cidr: IPNetwork

    def __post_init__(self) -> None:
        object.__setattr__(self, "cidr", to_network(self.cidr))
        Key.__post_init__(self)

    def default_path(self) -> str:
        version = self.cidr.version
        return f"/calico/ipam/v2/assignment/ipv{version}/block/{cidr_segment(self.cidr)}"


@cached_hash
@dataclass(frozen=True, slots=True)
class BlockAffinityKey(Key):
    """A host's claim on an IPAM block."""

    host: str
    cidr: IPNetwork

    def __post_init__(self) -> None:
        object.__setattr__(self, "cidr", to_network(self.cidr))
        Key.__post_init__(self)

    def default_path(self) -> str:
        host = seg(self, "host", self.host)
        version = self.cidr.version
        return f"/calico/ipam/v2/host/{host}/ipv{version}/block/{cidr_segment(self.cidr)}"


@cached_hash
@dataclass(frozen=True, slots=True)
class IPAMHandleKey(Key):
    """An IPAM handle (groups the addresses one allocation request took)."""

    handle_id: str

    def default_path(self) -> str:
        return f"/calico/ipam/v2/handle/{seg(self, 'handle_id', self.handle_id)}"
