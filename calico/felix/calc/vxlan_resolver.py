"""VXLANResolver: a VXLAN route is only usable once the remote node's VTEP is known - its
tunnel address, the VXLAN device MAC and the node IP the tunnel rides on. This node joins
those three facts per node and family and tells the dataplane about complete VTEPs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from calico.felix.calc.callbacks import PipelineCallbacks
from calico.felix.calc.fanout import TypeFanout
from calico.felix.messages import VXLANTunnelEndpointUpdate
from calico.model import HostConfigKey, ResourceKey
from calico.model.node_addresses import node_addresses
from calico.model.processors.common import mac_str
from calico.model.vtep import default_vtep_mac

if TYPE_CHECKING:  # an annotation only: a lean Node read's value (leannode) reads the same
    from calico.api.cluster import Node

TUNNEL_V4 = "IPv4VXLANTunnelAddr"
MAC_V4 = "VXLANTunnelMACAddr"
TUNNEL_V6 = "IPv6VXLANTunnelAddr"
MAC_V6 = "VXLANTunnelMACAddrV6"
_FIELDS = (TUNNEL_V4, MAC_V4, TUNNEL_V6, MAC_V6)
__all__ = ["VXLANResolver", "default_vtep_mac"]


def _mac(text: str | None, node: str, version: int) -> str:
    """A configured MAC (canonicalised when parseable, else passed on as written so the
    dataplane can reject that VTEP with a specific error, as upstream); else the default."""
    if text:
        try:
            return mac_str(text)
        except ValueError:
            return text
    return default_vtep_mac(node, version)


@dataclass
class _NodeState:
    parent_v4: str = ""
    parent_v6: str = ""
    config: dict[str, str] = field(default_factory=dict)


class VXLANResolver:
    """Registers ResourceKey (Node) and HostConfigKey (every host's tunnel address / MAC).

    Invariants: a node has a VTEP iff it has a node IP and a tunnel address for at least one
    family; the MAC falls back to ``default_vtep_mac``. A VTEP is sent once complete; a
    changed VTEP is sent as ``on_vtep_remove`` + ``on_vtep_update`` (the dataplane keys ARP/FDB
    entries by MAC and IP, so it must withdraw the old ones); an unchanged one is not re-sent;
    a VTEP that loses both families is removed.
    """

    def __init__(self, callbacks: PipelineCallbacks, hostname: str) -> None:
        self._cb = callbacks
        self._hostname = hostname  # the local VTEP is sent too; the dataplane skips it
        self._nodes: dict[str, _NodeState] = {}
        self._sent: dict[str, VXLANTunnelEndpointUpdate] = {}

    def register(self, fanout: TypeFanout) -> None:
        fanout.register(ResourceKey, self.on_resource)
        fanout.register(HostConfigKey, self.on_host_config)

    def _state(self, node: str) -> _NodeState:
        return self._nodes.setdefault(node, _NodeState())

    def on_resource(self, key: ResourceKey, value: Node | None) -> None:
        if key.kind != "Node":
            return
        state = self._state(key.name)
        addrs = node_addresses(value) if value is not None else None
        state.parent_v4 = str(addrs.v4.ip) if addrs and addrs.v4 else ""
        state.parent_v6 = str(addrs.v6.ip) if addrs and addrs.v6 else ""
        self._update(key.name)

    def on_host_config(self, key: HostConfigKey, value: str | None) -> None:
        if key.name not in _FIELDS:
            return
        config = self._state(key.hostname).config
        if value is None:
            config.pop(key.name, None)
        else:
            config[key.name] = value
        self._update(key.hostname)

    def vtep(self, node: str) -> VXLANTunnelEndpointUpdate | None:
        """The VTEP ``node`` should have now, or None if no family is complete."""
        state = self._nodes.get(node)
        if state is None:
            return None
        cfg = state.config
        v4 = bool(state.parent_v4 and cfg.get(TUNNEL_V4))
        v6 = bool(state.parent_v6 and cfg.get(TUNNEL_V6))
        if not (v4 or v6):
            return None
        return VXLANTunnelEndpointUpdate(
            node=node,
            mac=_mac(cfg.get(MAC_V4), node, 4) if v4 else "",
            ipv4_addr=cfg[TUNNEL_V4] if v4 else "",
            parent_device_ip=state.parent_v4 if v4 else "",
            mac_v6=_mac(cfg.get(MAC_V6), node, 6) if v6 else "",
            ipv6_addr=cfg[TUNNEL_V6] if v6 else "",
            parent_device_ipv6=state.parent_v6 if v6 else "",
        )

    def _update(self, node: str) -> None:
        new = self.vtep(node)
        old = self._sent.get(node)
        state = self._nodes[node]
        if not (state.parent_v4 or state.parent_v6 or state.config):
            del self._nodes[node]  # nothing left to remember
        if new == old:
            return
        if old is not None:
            del self._sent[node]
            self._cb.on_vtep_remove(node)
        if new is not None:
            self._sent[node] = new
            self._cb.on_vtep_update(new)
