"""Host address sets: ``all-hosts-net`` (every node's IPs, from host metadata) and ``this-host``
(this node's interface addresses, from the interface monitor).

Upstream uses them for IPIP/VXLAN and host-traffic rules; programming them keeps the names
available for rules that reference them and mirrors upstream's table contents.
"""

from __future__ import annotations

import ipaddress

from calico.felix.messages import (
    HostMetadataRemove,
    HostMetadataUpdate,
    HostMetadataV4V6Remove,
    HostMetadataV4V6Update,
    ToDataplane,
)
from calico.felix.nftables.model import NftSet, ipset_name
from calico.felix.nftables.table import NftablesTable
from calico.felix.rules.static import IPSET_ALL_HOSTS

IPSET_THIS_HOST = "this-host"


def _addr(text: str) -> str | None:
    try:
        return str(ipaddress.ip_interface(text.strip()).ip) if text.strip() else None
    except ValueError:
        return None


class HostsIPSetManager:
    def __init__(self, table: NftablesTable, ip_versions: tuple[int, ...] = (4, 6)) -> None:
        self._table = table
        self._versions = ip_versions
        self._hosts: dict[str, set[str]] = {}
        self._iface_addrs: dict[str, set[str]] = {}
        self._dirty = True

    @property
    def num_hosts(self) -> int:
        return len(self._hosts)

    def on_update(self, msg: ToDataplane) -> None:
        if isinstance(msg, HostMetadataUpdate | HostMetadataV4V6Update):
            v6 = msg.ipv6_addr if isinstance(msg, HostMetadataV4V6Update) else ""
            addrs = {a for a in (_addr(msg.ipv4_addr), _addr(v6)) if a}
            if self._hosts.get(msg.hostname) != addrs:
                self._hosts[msg.hostname] = addrs
                self._dirty = True
        elif isinstance(msg, HostMetadataRemove | HostMetadataV4V6Remove):
            self._dirty |= self._hosts.pop(msg.hostname, None) is not None

    def on_iface_state(self, name: str, state: str, index: int) -> None:
        if state == "absent":
            self._dirty |= self._iface_addrs.pop(name, None) is not None

    def on_iface_addrs(self, name: str, addrs: set[str] | None) -> None:
        new = {a for a in (_addr(x) for x in addrs or ()) if a}
        if self._iface_addrs.get(name, set()) != new:
            self._iface_addrs[name] = new
            self._dirty = True

    def complete_deferred_work(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        hosts: set[str] = set().union(*self._hosts.values())
        local: set[str] = set().union(*self._iface_addrs.values())
        for version in self._versions:
            for set_id, addrs in ((IPSET_ALL_HOSTS, hosts), (IPSET_THIS_HOST, local)):
                members = {a for a in addrs if (":" in a) == (version == 6)}
                name = ipset_name(set_id, version)
                self._table.set_set(NftSet(name, f"ipv{version}_addr", False, members))
