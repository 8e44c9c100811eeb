"""Calico IP sets -> the ``cpy_v4_ipsets`` / ``cpy_v6_ipsets`` LPM maps, keyed by set id.

Members are written as they arrive (IP sets are programmed before the policies that use them,
because the calc graph sends them first and the endpoint manager regenerates programs only at
deferred-work time). Only the map changes: never a program.
"""

from __future__ import annotations

import logging

from calico.felix.bpf.idalloc import IDAllocator
from calico.felix.bpf.maps import IPSET_VALUE, Maps, ipset6_key, ipset_key
from calico.felix.messages import IPSetDeltaUpdate, IPSetRemove, IPSetUpdate, ToDataplane

log = logging.getLogger(__name__)
_PRESENT = IPSET_VALUE.pack(1)


class BPFIPSets:
    def __init__(self, maps: Maps, ids: IDAllocator) -> None:
        self._maps = maps
        self.ids = ids
        self._members: dict[str, set[bytes]] = {}
        # A predecessor's entries (the map is pinned); those nobody re-sends go at resync().
        self._inherited: set[bytes] | None = {*maps.ipsets.keys(), *maps.ipsets6.keys()}

    def resync(self) -> int:
        """Once, after the first complete picture: delete inherited entries no set still has.

        Set ids are deterministic, so entries of sets that still exist were simply rewritten;
        returns how many were deleted."""
        if self._inherited is None:
            return 0
        wanted: set[bytes] = set().union(*self._members.values())
        stale = self._inherited - wanted
        for key in stale:
            self._maps.ipset_map(key).delete(key)
        self._inherited = None
        return len(stale)

    @property
    def num_sets(self) -> int:
        return len(self._members)

    def on_update(self, msg: ToDataplane) -> None:
        if isinstance(msg, IPSetUpdate):
            keys = self._keys(msg.id, msg.members)
            old = self._members.get(msg.id, set())
            for k in keys - old:
                self._maps.ipset_map(k).update(k, _PRESENT)
            for k in old - keys:
                self._maps.ipset_map(k).delete(k)
            self._members[msg.id] = keys
        elif isinstance(msg, IPSetDeltaUpdate):
            have = self._members.get(msg.id)
            if have is None:
                log.warning("Delta for unknown IP set %s; ignoring", msg.id)
                return
            for k in self._keys(msg.id, msg.removed_members):
                self._maps.ipset_map(k).delete(k)
                have.discard(k)
            for k in self._keys(msg.id, msg.added_members):
                self._maps.ipset_map(k).update(k, _PRESENT)
                have.add(k)
        elif isinstance(msg, IPSetRemove):
            for k in self._members.pop(msg.id, set()):
                self._maps.ipset_map(k).delete(k)
            self.ids.release(msg.id)

    def _keys(self, set_id: str, members: tuple[str, ...]) -> set[bytes]:
        sid = self.ids.get_or_alloc(set_id)
        out = set()
        for m in members:
            try:
                key = ipset_key(sid, m) or ipset6_key(sid, m)
            except ValueError:
                log.warning("IP set %s: bad member %r; skipping", set_id, m)
                continue
            if key is not None:
                out.add(key)
        return out
