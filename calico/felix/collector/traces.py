"""A packet's NFLOG hits -> its enforced and pending (staged-in-force) policy traces.

The hits arrive in evaluation order: per tier, enforced and staged policies interleaved (a
staged policy's chain only reports, design/felix-collector.md "Staged policies"), then the end
of the tier, then profiles; the packet's evaluation ends at the first enforced allow or deny.
The enforced trace is the enforced hits (an end-of-tier hit of a tier with only staged policies
is not one: that tier does not apply). The pending trace is what would have happened with the
staged policies in force: per tier the first hit of either kind decides; an end-of-tier hit
takes the tier's default action.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from calico.felix.collector.lookups import Hit, Lookups
from calico.felix.collector.nflog import NflogPacket
from calico.felix.messages import TierInfo
from calico.felix.rules.nflog import NFLOG_INBOUND_GROUP
from calico.proto.goldmane import api_pb2 as pb

MAX_PENDING_HITS = 64


class TraceBuilder:
    """Collects a packet's hits until its terminal (enforced allow/deny) hit arrives."""

    def __init__(self, lookups: Lookups) -> None:
        self.lookups = lookups
        self._pending: dict[tuple[bool, object], list[Hit]] = {}
        self.unknown = 0  # prefixes no current policy or profile rendered
        self._stale: set[tuple[bool, object]] = set()

    def add(self, pkt: NflogPacket) -> tuple[bool, list[Hit]] | None:
        """(inbound, hits) once the packet's terminal hit arrives; None before that."""
        inbound = pkt.group == NFLOG_INBOUND_GROUP
        hit = self.lookups.rule(pkt.prefix)
        if hit is None:
            self.unknown += 1
            return None
        key = (inbound, pkt.tuple)
        hits = self._pending.setdefault(key, [])
        hits.append(hit)
        if not hit.terminal:
            if len(hits) > MAX_PENDING_HITS:  # never terminated (cannot happen in our rules)
                del self._pending[key]
            return None
        del self._pending[key]
        return inbound, hits

    def reset(self) -> None:
        """Forget traces unfinished since the previous reset: a packet's hits arrive within
        milliseconds, so those never get their terminal hit (e.g. its policy was removed)."""
        for key in self._stale & self._pending.keys():
            del self._pending[key]
        self._stale = set(self._pending)


def _has_enforced(info: TierInfo | None, inbound: bool) -> bool:
    if info is None:
        return True
    ids = info.ingress_policies if inbound else info.egress_policies
    return any(not p.kind.startswith("Staged") for p in ids)


def split(
    hits: Sequence[Hit], inbound: bool, tier_info: Callable[[str], TierInfo | None]
) -> tuple[list[Hit], list[Hit]]:
    """(enforced, pending) traces of one packet's hits (see module docstring)."""
    enforced: list[Hit] = []
    pending: list[Hit] = []
    decided = False
    tier, tier_done = None, False
    for h in hits:
        info = tier_info(h.tier) if h.end_of_tier else None
        if not h.staged and not (h.end_of_tier and not _has_enforced(info, inbound)):
            enforced.append(h)
        if decided:
            continue
        if h.tier != tier:
            tier, tier_done = h.tier, False
        if tier_done:
            continue
        if h.end_of_tier:
            default = info.default_action if info is not None else "Deny"
            h = dataclasses.replace(h, action=pb.Pass if default == "Pass" else pb.Deny)
        pending.append(h)
        if h.action == pb.Pass:
            tier_done = True
        else:
            decided = True
    return enforced, pending
