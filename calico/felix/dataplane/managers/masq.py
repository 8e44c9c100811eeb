"""NAT outgoing: IP pools -> the ``masq-ipam-pools`` and ``all-ipam-pools`` sets.

The static ``nat-cali-nat-outgoing`` chain masquerades traffic from a ``natOutgoing`` pool to
anywhere outside all pools; this manager only keeps the two sets (per family) filled. Pools
never overlap (the API refuses it), but members are collapsed anyway because an overlap would
fail the whole nft transaction.
"""

from __future__ import annotations

import ipaddress

from calico.felix.dataplane.managers.overlap import Net, net_text
from calico.felix.messages import IPAMPool, IPAMPoolRemove, IPAMPoolUpdate, ToDataplane
from calico.felix.nftables.model import NftSet, ipset_name
from calico.felix.nftables.table import NftablesTable
from calico.felix.rules.static import IPSET_ALL_POOLS, IPSET_MASQ_POOLS


def _collapse(nets: list[Net], version: int) -> set[str]:
    fam = [n for n in nets if n.version == version]
    return {net_text(n) for n in ipaddress.collapse_addresses(fam)}  # type: ignore[arg-type]


class MasqManager:
    def __init__(self, table: NftablesTable, ip_versions: tuple[int, ...] = (4, 6)) -> None:
        self._table = table
        self._versions = ip_versions
        self._pools: dict[str, IPAMPool] = {}
        self._dirty = True  # create the (empty) sets the static chains reference

    def on_update(self, msg: ToDataplane) -> None:
        if isinstance(msg, IPAMPoolUpdate):
            self._pools[msg.id] = msg.pool
            self._dirty = True
        elif isinstance(msg, IPAMPoolRemove):
            self._dirty |= self._pools.pop(msg.id, None) is not None

    def complete_deferred_work(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        all_nets = [ipaddress.ip_network(p.cidr, strict=False) for p in self._pools.values()]
        masq = [
            ipaddress.ip_network(p.cidr, strict=False) for p in self._pools.values() if p.masquerade
        ]
        for version in self._versions:
            for set_id, nets in ((IPSET_ALL_POOLS, all_nets), (IPSET_MASQ_POOLS, masq)):
                name = ipset_name(set_id, version)
                members = _collapse(nets, version)
                self._table.set_set(NftSet(name, f"ipv{version}_addr", True, members))
