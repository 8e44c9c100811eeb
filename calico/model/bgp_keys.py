"""BGP keys read by confd: global/per-node config values and computed peerings.

Config names may span segments (``prefix_advertisements/ip_v4``), so a name whose first segment
is ``peer_v4``/``peer_v6`` followed by more segments would collide with a peering path; such
names are refused. Peer keys carry the port; the path shows it only when it is not BGP's 179.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from calico.model.base import Key, cached_hash, seg, tail
from calico.model.escaping import InvalidKeyError, IPAddress, to_address

DEFAULT_BGP_PORT = 179
PEER_SEGMENTS = frozenset({"peer_v4", "peer_v6"})


def _config_name(key: Key, name: str) -> str:
    tail(key, "name", name)
    first, sep, _ = name.partition("/")
    if sep and first in PEER_SEGMENTS:
        raise InvalidKeyError(f"{type(key).__name__}: name {name!r} collides with peer paths")
    return name


def _peer_segment(ip: IPAddress, port: int) -> str:
    return str(ip) if port == DEFAULT_BGP_PORT else f"{ip}-{port}"


def _init_peer(key: Any) -> None:
    """Both peer keys: the address as an object, port 0 as the default, then the path check."""
    object.__setattr__(key, "peer_ip", to_address(key.peer_ip))
    if key.port == 0:  # upstream treats 0 as "unset", i.e. the default
        object.__setattr__(key, "port", DEFAULT_BGP_PORT)
    elif not 0 < key.port < 65536:
        raise InvalidKeyError(f"{type(key).__name__}: port {key.port} out of range")
    Key.__post_init__(key)


@cached_hash
@dataclass(frozen=True, slots=True)
class GlobalBGPConfigKey(Key):
    """A cluster-wide BGP value, e.g. ``as_num``, ``node_mesh``."""

    name: str

    def default_path(self) -> str:
        return f"/calico/bgp/v1/global/{_config_name(self, self.name)}"


@cached_hash
@dataclass(frozen=True, slots=True)
class NodeBGPConfigKey(Key):
    """A per-node BGP value, e.g. ``ip_addr_v4``, ``rr_cluster_id``."""

    node_name: str
    name: str

    def default_path(self) -> str:
        node = seg(self, "node_name", self.node_name)
        return f"/calico/bgp/v1/host/{node}/{_config_name(self, self.name)}"


@cached_hash
@dataclass(frozen=True, slots=True)
class GlobalBGPPeerKey(Key):
    """A peering every node makes."""

    peer_ip: IPAddress
    port: int = DEFAULT_BGP_PORT

    def __post_init__(self) -> None:
        _init_peer(self)

    def default_path(self) -> str:
        ip = self.peer_ip
        return f"/calico/bgp/v1/global/peer_v{ip.version}/{_peer_segment(ip, self.port)}"


@cached_hash
@dataclass(frozen=True, slots=True)
class NodeBGPPeerKey(Key):
    """A peering made by one node."""

    node_name: str
    peer_ip: IPAddress
    port: int = DEFAULT_BGP_PORT

    def __post_init__(self) -> None:
        _init_peer(self)

    def default_path(self) -> str:
        node = seg(self, "node_name", self.node_name)
        ip = self.peer_ip
        return f"/calico/bgp/v1/host/{node}/peer_v{ip.version}/{_peer_segment(ip, self.port)}"
