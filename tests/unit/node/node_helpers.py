"""Shared builders for node unit tests."""

from __future__ import annotations

import ipaddress

from calico.node.interfaces import Interface


def iface(name: str, *cidrs: str, index: int = 0) -> Interface:
    return Interface(name, index, tuple(ipaddress.ip_interface(c) for c in cidrs))
