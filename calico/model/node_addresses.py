"""Which addresses a Node routes by: the one rule Felix's host metadata, L3 route resolver and
VXLAN resolver use, and ``calicoctl explain``'s tunnel crossings (``calico.policyeval.tunnels``)
reproduce, so a route's next hop, a VTEP's parent and explain's "same subnet" always agree.

Duck-typed over a validated v3 Node (``calico.api.cluster.Node``) so that explain, which reads
Nodes through its conversion cache, need not import the pydantic models.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

Interface = ipaddress.IPv4Interface | ipaddress.IPv6Interface


@dataclass(frozen=True)
class NodeAddresses:
    """A node's v4/v6 address with its subnet (``10.0.0.1/24``), plus every listed address."""

    v4: ipaddress.IPv4Interface | None = None
    v6: ipaddress.IPv6Interface | None = None
    others: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, ...] = ()


def interface_or_none(text: Any) -> Interface | None:
    """``text`` as an address with its prefix, or None when it is empty or not one."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return ipaddress.ip_interface(text)
    except ValueError:
        return None


def node_addresses(node: Any) -> NodeAddresses:
    """The BGP addresses when the node has any; otherwise the first InternalIP (then
    ExternalIP) of each family from ``spec.addresses`` (BGP-less clusters, e.g. VXLAN-only)."""
    spec = node.spec
    listed = [
        (entry.type or "", iface)
        for entry in spec.addresses or ()
        if (iface := interface_or_none(entry.address)) is not None
    ]
    v4 = interface_or_none(spec.bgp.ipv4_address) if spec.bgp else None
    v6 = interface_or_none(spec.bgp.ipv6_address) if spec.bgp else None
    if v4 is None and v6 is None:
        for wanted in ("InternalIP", "ExternalIP"):
            for kind, iface in listed:
                if kind != wanted:
                    continue
                if iface.version == 4 and v4 is None:
                    v4 = iface
                elif iface.version == 6 and v6 is None:
                    v6 = iface
    return NodeAddresses(
        v4=v4 if isinstance(v4, ipaddress.IPv4Interface) else None,
        v6=v6 if isinstance(v6, ipaddress.IPv6Interface) else None,
        others=tuple(iface.ip for _, iface in listed),
    )


__all__ = ["Interface", "NodeAddresses", "interface_or_none", "node_addresses"]
