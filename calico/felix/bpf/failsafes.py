"""FailsafeInbound/OutboundHostPorts -> the failsafe LPM maps the host endpoint programs read.

Upstream's BPF mode keeps failsafes in a map (``cali_v4_fsafes``) that the host endpoint
programs check ahead of policy; ours is ``cpy_v4_fsafes`` / ``cpy_v6_fsafes`` with upstream's
key layout. An entry without a net applies to every remote address of both families.
Written once at start (the config is static for a Felix run); entries a predecessor left
that the config no longer lists are deleted. Design: design/felix-bpf.md "Host endpoints".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from calico.felix.bpf.maps import Maps, fsafe_key

_ONE = (1).to_bytes(4, "little")


def failsafe_keys(inbound: Iterable[Any], outbound: Iterable[Any]) -> set[bytes]:
    """LPM keys for the parsed port lists (``ProtoPort``: protocol, port, net or "")."""
    keys = set()
    for entries, out in ((inbound, False), (outbound, True)):
        for pp in entries:
            nets = [pp.net] if pp.net else ["0.0.0.0/0", "::/0"]
            keys.update(fsafe_key(pp.protocol, pp.port, net, out) for net in nets)
    return keys


def sync(maps: Maps, keys: set[bytes]) -> tuple[int, int]:
    """Make both maps hold exactly ``keys``; returns (added, removed)."""
    removed, present = 0, set()
    for m in (maps.fsafes, maps.fsafes6):
        for key in list(m.keys()):
            if key in keys:
                present.add(key)
            else:
                m.delete(key)
                removed += 1
    for key in sorted(keys - present):  # (a lookup would longest-prefix match: no exact test)
        maps.fsafe_map(key).update(key, _ONE)
    return len(keys - present), removed
