"""What confd knows: the BGP syncer's updates kept as typed objects (design/confd.md "Data").

The syncer sends IPPools as v1 ``IPPool`` values, this node's block affinities as v1
``BlockAffinity`` values, and BGPConfiguration, Node, BGPPeer and BGPFilter as v3 resources.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from calico.model import Key
from calico.model.ipam_keys import BlockAffinityKey, IPPoolKey
from calico.model.resources import ResourceKey
from calico.syncer.api import Update

KINDS = ("BGPConfiguration", "Node", "BGPPeer", "BGPFilter")


@dataclass
class BGPState:
    pools: dict[str, Any] = field(default_factory=dict)  # cidr -> v1 IPPool
    affinities: dict[str, Any] = field(default_factory=dict)  # cidr -> v1 BlockAffinity
    resources: dict[str, dict[str, Any]] = field(default_factory=lambda: {k: {} for k in KINDS})

    def apply(self, update: Update) -> bool:
        """Record one update; False when the key is not one confd uses."""
        key: Key = update.key
        value = update.value
        if isinstance(key, IPPoolKey):
            table, name = self.pools, str(key.cidr)
        elif isinstance(key, BlockAffinityKey):
            table, name = self.affinities, str(key.cidr)
        elif isinstance(key, ResourceKey) and key.kind in self.resources:
            table, name = self.resources[key.kind], key.name
        else:
            return False
        if value is None:
            table.pop(name, None)
        else:
            table[name] = value
        return True

    @property
    def nodes(self) -> dict[str, Any]:
        return self.resources["Node"]

    @property
    def peers(self) -> dict[str, Any]:
        return self.resources["BGPPeer"]

    @property
    def filters(self) -> dict[str, Any]:
        return self.resources["BGPFilter"]

    @property
    def bgp_configs(self) -> dict[str, Any]:
        return self.resources["BGPConfiguration"]

    def global_config(self) -> Any | None:
        return self.bgp_configs.get("default")


def state_from_resources(resources: list[Any], nodename: str) -> BGPState:
    """A BGPState from v3 resources, through the BGP syncer's own update processors
    (golden tests and the benchmark build scenarios this way)."""
    from calico.syncer.api import UpdateType
    from calico.syncer.definitions import bgp_resource_types

    procs = {rt.kind: rt.processor for rt in bgp_resource_types(nodename)}
    state = BGPState()
    for res in resources:
        proc = procs.get(res.kind)
        if proc is None:
            continue
        key = ResourceKey(res.kind, res.metadata.name, res.metadata.namespace or "")
        for k, v in proc(key, res.to_wire()).items():
            state.apply(Update(k, v, "1", UpdateType.NEW))
    return state
