"""This host's interfaces and addresses, read over netlink in the current network namespace.

Kept apart from the detection logic so that logic can be tested against a made-up host.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field

IfaceAddr = ipaddress.IPv4Interface | ipaddress.IPv6Interface


@dataclass(frozen=True)
class Interface:
    """One link with its addresses (address plus prefix, e.g. 10.0.0.5/24)."""

    name: str
    index: int = 0
    cidrs: tuple[IfaceAddr, ...] = field(default_factory=tuple)

    def of_version(self, version: int) -> tuple[IfaceAddr, ...]:
        return tuple(c for c in self.cidrs if c.version == version)


def list_interfaces() -> list[Interface]:
    """Every link in index order (what Go's net.Interfaces returns), with all its addresses."""
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        links = ipr.get_links()
        addrs = ipr.get_addr()
    by_index: dict[int, list[IfaceAddr]] = {}
    for msg in addrs:
        family = msg["family"]
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        # For IPv4 the local address is the host's own (they differ on point-to-point links).
        ip = (msg.get_attr("IFA_LOCAL") if family == socket.AF_INET else None) or msg.get_attr(
            "IFA_ADDRESS"
        )
        if not ip:
            continue
        by_index.setdefault(msg["index"], []).append(
            ipaddress.ip_interface(f"{ip}/{msg['prefixlen']}")
        )
    result = [
        Interface(
            name=str(link.get_attr("IFLA_IFNAME")),
            index=int(link["index"]),
            cidrs=tuple(by_index.get(link["index"], ())),
        )
        for link in links
    ]
    return sorted(result, key=lambda i: i.index)
