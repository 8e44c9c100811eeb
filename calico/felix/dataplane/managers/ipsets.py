"""Calico IP sets -> nft sets in the ``inet calico`` table, one per family.

The rule renderer references ``cali40<id>`` *and* ``cali60<id>`` for every set a rule mentions
when IPv6 is on, so every set exists in both families even if one of them is empty. NET sets are
interval sets, kept overlap-free by :class:`OverlapSuppressor`; IP and IP+port sets are plain.
"""

from __future__ import annotations

import _socket
import logging
from collections.abc import Iterable
from typing import Any

from calico.felix.dataplane.managers.overlap import OverlapSuppressor, net_text, parse_net
from calico.felix.messages import (
    IPSetDeltaUpdate,
    IPSetRemove,
    IPSetType,
    IPSetUpdate,
    ToDataplane,
)
from calico.felix.nftables.model import NftSet, ipset_name
from calico.felix.nftables.table import NftablesTable

log = logging.getLogger(__name__)


def set_type(kind: IPSetType, version: int) -> str | tuple[str, ...]:
    addr = f"ipv{version}_addr"
    if kind is IPSetType.IP_AND_PORT:
        return (addr, "inet_proto", "inet_service")
    return addr


def member_family(member: str) -> int:
    return 6 if ":" in member.split(",", 1)[0] else 4


def by_family(members: Iterable[str]) -> dict[int, list[str]]:
    """The members by :func:`member_family`, each list in the given order: one family test a
    member, not one per family's set (a first apply sends 250,000 of one set's members)."""
    out: dict[int, list[str]] = {}
    for m in members:
        family = member_family(m)
        group = out.get(family)
        if group is None:
            out[family] = [m]
        else:
            group.append(m)
    return out


def member_element(kind: IPSetType, member: str) -> Any:
    """Wire member (``10.0.0.1/32``, ``10.0.0.1,tcp:8080``) -> table element."""
    if kind is IPSetType.IP_AND_PORT:
        addr, _, proto_port = member.partition(",")
        proto, _, port = proto_port.partition(":")
        return (host_text(addr), proto.lower(), int(port))
    return net_text(parse_net(member))


def host_text(addr: str) -> str:
    """``net_text(parse_net(addr))``; a canonical dotted quad (what the calc graph sends, by
    the hundred thousand in a first apply) is its own answer, checked with inet_pton and
    inet_ntop instead of ``ipaddress`` (design/performance.md "Full-Felix scale: the
    snapshot path"). Anything else goes through ``ipaddress``, errors included."""
    try:
        if _socket.inet_ntop(_socket.AF_INET, _socket.inet_pton(_socket.AF_INET, addr)) == addr:
            return addr
    except (OSError, TypeError, ValueError):
        pass
    return net_text(parse_net(addr))


class _FamilySet:
    """One nft set (one family) of one Calico IP set."""

    def __init__(self, table: NftablesTable, name: str, kind: IPSetType, version: int) -> None:
        self.table, self.name, self.kind = table, name, kind
        self.suppressor = OverlapSuppressor() if kind is IPSetType.NET else None
        typ = set_type(kind, version)
        table.set_set(NftSet(name, typ, interval=kind is IPSetType.NET))

    def add(self, members: Iterable[str]) -> None:
        self._change(members, adding=True)

    def remove(self, members: Iterable[str]) -> None:
        self._change(members, adding=False)

    def _change(self, members: Iterable[str], *, adding: bool) -> None:
        """Add or remove Calico members; a NET set goes through the overlap suppressor, whose
        answer (what to program, what to take out) may differ from the request."""
        adds: list[Any] = []
        removes: list[Any] = []
        for m in members:
            if self.suppressor is None:
                (adds if adding else removes).append(member_element(self.kind, m))
                continue
            change = self.suppressor.add if adding else self.suppressor.remove
            a, r = change(parse_net(m))
            adds += [net_text(n) for n in a]
            removes += [net_text(n) for n in r]
        self._apply(adds, removes)

    def _apply(self, adds: list[Any], removes: list[Any]) -> None:
        if removes:
            self.table.remove_set_members(self.name, removes)
        if adds:
            self.table.add_set_members(self.name, adds)


class IPSetsManager:
    def __init__(self, table: NftablesTable, ip_versions: tuple[int, ...] = (4, 6)) -> None:
        self._table = table
        self._versions = ip_versions
        self._sets: dict[str, dict[int, _FamilySet]] = {}

    @property
    def num_sets(self) -> int:
        """Programmed nft sets (both families), for ``felix_ipsets_calico``."""
        return sum(len(v) for v in self._sets.values())

    @property
    def set_ids(self) -> list[str]:
        return sorted(self._sets)

    def on_update(self, msg: ToDataplane) -> None:
        if isinstance(msg, IPSetUpdate):
            self._replace(msg.id, msg.type, msg.members)
        elif isinstance(msg, IPSetDeltaUpdate):
            sets = self._sets.get(msg.id)
            if sets is None:
                log.warning("Delta for unknown IP set %s; ignoring", msg.id)
                return
            removed = by_family(msg.removed_members)
            added = by_family(msg.added_members)
            for version, fs in sets.items():
                fs.remove(removed.get(version, ()))
                fs.add(added.get(version, ()))
        elif isinstance(msg, IPSetRemove):
            for fs in self._sets.pop(msg.id, {}).values():
                self._table.remove_set(fs.name)

    def _replace(self, set_id: str, kind: IPSetType, members: Iterable[str]) -> None:
        families = by_family(members)
        new: dict[int, _FamilySet] = {}
        for version in self._versions:
            fs = _FamilySet(self._table, ipset_name(set_id, version), kind, version)
            fs.add(families.get(version, ()))
            new[version] = fs
        self._sets[set_id] = new

    def complete_deferred_work(self) -> None:
        """Nothing deferred: deltas go to the table as they arrive (it is the buffer)."""
