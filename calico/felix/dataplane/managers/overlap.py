"""Keeps an nft interval set free of overlapping CIDRs (design/felix-dataplane.md, "Managers'
contracts", IP sets).

The kernel refuses a member that overlaps another in an interval set ("interval overlaps") and
fails the whole transaction. Calico IP sets can legitimately hold both ``10.0.0.0/8`` and
``10.1.2.3`` (a network set plus a pod), so, as upstream's nftables mode does, we program only
the members not covered by a larger member of the same set and bring the covered ones back when
their cover goes. The packet-matching result is identical either way.
"""

from __future__ import annotations

import ipaddress
from collections import Counter

Net = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_net(text: str) -> Net:
    return ipaddress.ip_network(text.strip(), strict=False)


def net_text(net: Net) -> str:
    """Canonical member text: a host prefix is the bare address (as the table layer spells it)."""
    if net.prefixlen == net.max_prefixlen:
        return str(net.network_address)
    return str(net)


class OverlapSuppressor:
    """Wanted members of one set (one family) and the non-overlapping subset to program.

    ``add``/``remove`` return ``(to_add, to_remove)`` deltas for the programmed subset, so the
    caller can forward them straight to the table.
    """

    def __init__(self) -> None:
        self._members: set[Net] = set()
        self._programmed: set[Net] = set()
        self._prefix_lens: Counter[int] = Counter()

    @property
    def programmed(self) -> set[Net]:
        return set(self._programmed)

    def __len__(self) -> int:
        return len(self._members)

    def _covered(self, net: Net) -> bool:
        """Whether a strictly larger member contains ``net``."""
        for plen in self._prefix_lens:
            if plen < net.prefixlen and net.supernet(new_prefix=plen) in self._members:
                return True
        return False

    def add(self, net: Net) -> tuple[list[Net], list[Net]]:
        if net in self._members:
            return [], []
        self._members.add(net)
        self._prefix_lens[net.prefixlen] += 1
        if self._covered(net):
            return [], []
        removed: list[Net] = []
        if net.prefixlen < net.max_prefixlen:
            removed = [m for m in self._programmed if m.subnet_of(net)]  # type: ignore[arg-type]
            self._programmed.difference_update(removed)
        self._programmed.add(net)
        return [net], removed

    def remove(self, net: Net) -> tuple[list[Net], list[Net]]:
        if net not in self._members:
            return [], []
        self._members.remove(net)
        self._prefix_lens[net.prefixlen] -= 1
        if not self._prefix_lens[net.prefixlen]:
            del self._prefix_lens[net.prefixlen]
        if net not in self._programmed:
            return [], []
        self._programmed.remove(net)
        added: list[Net] = []
        if net.prefixlen < net.max_prefixlen:
            added = [
                m
                for m in self._members
                if m.subnet_of(net) and not self._covered(m)  # type: ignore[arg-type]
            ]
            self._programmed.update(added)
        return added, [net]
