"""Per-peer suppression of resent flows.

After a reconnect, Felix resends every flow it sent in the last five minutes, so the server
can rebuild state it may have lost; a server that kept its state must not count them twice.
Each peer (by host: a reconnect comes from a new port) has a cache of the exact flows it sent,
entries expiring ``ttl`` seconds after they were last seen.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

TTL = 300.0


class DedupCache:
    def __init__(self, ttl: float = TTL) -> None:
        self.ttl = ttl
        self._seen: OrderedDict[tuple[str, bytes], float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def is_duplicate(self, peer: str, flow_bytes: bytes, now: float) -> bool:
        """True if ``peer`` sent exactly this flow within the TTL; records it either way."""
        self.expire(now)
        k = (peer, hashlib.blake2b(flow_bytes, digest_size=16).digest())
        dup = k in self._seen
        self._seen[k] = now + self.ttl
        self._seen.move_to_end(k)
        return dup

    def expire(self, now: float) -> None:
        while self._seen:
            k, deadline = next(iter(self._seen.items()))
            if deadline > now:
                return
            del self._seen[k]
