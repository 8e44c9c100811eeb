"""The VXLAN tunnel MAC a node gets when its Node sets none (upstream vtepMACForHost).

Shared by Felix (the VTEP it programs) and the tunnel-address allocator (the MAC it records
on the Node), so both always agree.
"""

from __future__ import annotations

import hashlib


def default_vtep_mac(node: str, version: int = 4) -> str:
    """The byte ``f`` (0x66) then the first five bytes of SHA-1 of the node name
    (``<name>-v6`` for IPv6), lower-case and colon separated."""
    name = node if version == 4 else f"{node}-v6"
    raw = b"f" + hashlib.sha1(name.encode()).digest()[:5]
    return ":".join(f"{b:02x}" for b in raw)


__all__ = ["default_vtep_mac"]
