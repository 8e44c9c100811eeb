"""Calc-graph IP set ids (strings) -> 64-bit ids for the LPM key, as upstream's idalloc.

For n = 0, 1, ...: SHA-256(n as 8 little-endian bytes + id), first 8 bytes as a little-endian
u64; the first candidate that is non-zero and not held by another set wins. Deterministic, so a
restarted Felix reuses the ids its predecessor wrote into the pinned map.
"""

from __future__ import annotations

import hashlib


class IDAllocator:
    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._owners: dict[int, str] = {}

    def get_or_alloc(self, name: str) -> int:
        if name in self._ids:
            return self._ids[name]
        n = 0
        while True:
            digest = hashlib.sha256(n.to_bytes(8, "little") + name.encode()).digest()
            cand = int.from_bytes(digest[:8], "little")
            if cand != 0 and cand not in self._owners:
                break
            n += 1
        self._ids[name] = cand
        self._owners[cand] = name
        return cand

    def get(self, name: str) -> int | None:
        return self._ids.get(name)

    def release(self, name: str) -> None:
        sid = self._ids.pop(name, None)
        if sid is not None:
            del self._owners[sid]
