"""The host addresses Node resources list, so explain can tell a node's own address from an
outside one when no host endpoint lists it (design/explain.md "Host addresses from Nodes"):
traffic to it is the host's (INPUT, or DefaultEndpointToHostAction from its own workloads),
traffic from it is the host's own (OUTPUT)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from calico.policyeval.dataset import IPAddress
from calico.policyeval.storeddocs import documents

# (path in the Node's JSON, shown as) of every single-address field.
_FIELDS = (
    (("spec", "bgp", "ipv4Address"), "spec.bgp.ipv4Address"),
    (("spec", "bgp", "ipv6Address"), "spec.bgp.ipv6Address"),
    (("spec", "bgp", "ipv4IPIPTunnelAddr"), "spec.bgp.ipv4IPIPTunnelAddr"),
    (("spec", "ipv4VXLANTunnelAddr"), "spec.ipv4VXLANTunnelAddr"),
    (("spec", "ipv6VXLANTunnelAddr"), "spec.ipv6VXLANTunnelAddr"),
    (("spec", "wireguard", "interfaceIPv4Address"), "spec.wireguard.interfaceIPv4Address"),
    (("spec", "wireguard", "interfaceIPv6Address"), "spec.wireguard.interfaceIPv6Address"),
)


def _address(value: Any) -> IPAddress | None:
    if not isinstance(value, str):
        return None
    try:
        return ipaddress.ip_interface(value.strip()).ip
    except ValueError:
        return None


def node_addresses(raw: dict[str, Any]) -> list[tuple[IPAddress, str]]:
    """(address, where it is listed) for one stored Node document."""
    out = []
    for path, shown in _FIELDS:
        value: Any = raw
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        addr = _address(value)
        if addr is not None:
            out.append((addr, shown))
    spec = raw.get("spec") if isinstance(raw.get("spec"), dict) else {}
    for entry in spec.get("addresses") or []:
        addr = _address(entry.get("address") if isinstance(entry, dict) else None)
        if addr is not None:
            out.append((addr, "spec.addresses"))
    return out


@dataclass
class NodeAddresses:
    """Address -> [(node, field)] over the stored Nodes."""

    by_address: dict[IPAddress, list[tuple[str, str]]] = field(default_factory=dict)

    @classmethod
    def from_kvs(cls, prefix: str, kvs: Iterable[Any]) -> NodeAddresses:
        out = cls()
        for name, raw, _text in documents(prefix, kvs):
            out.add(name, raw)
        return out

    def add(self, node: str, raw: dict[str, Any]) -> None:
        for addr, shown in node_addresses(raw):
            owners = self.by_address.setdefault(addr, [])
            if all(n != node for n, _ in owners):
                owners.append((node, shown))

    def owner(self, addr: IPAddress) -> tuple[str, str] | None:
        """(node, field) of the one node listing ``addr``; None if none does; ValueError if
        several do (a misconfiguration explain cannot resolve)."""
        owners = self.by_address.get(addr, [])
        if len(owners) > 1:
            nodes = ", ".join(sorted(n for n, _ in owners))
            raise ValueError(f"address {addr} is listed by several nodes: {nodes}")
        return owners[0] if owners else None
