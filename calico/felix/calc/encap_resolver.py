"""EncapsulationResolver: whether IPIP / VXLAN (v4, v6) are needed follows from the IP pools
(unless config forces them). Felix compares the result with what it started with and
restarts on a difference, so nothing is sent before the pool picture is complete (InSync)."""

from __future__ import annotations

import ipaddress

from calico.felix.calc.callbacks import PipelineCallbacks
from calico.felix.calc.fanout import TypeFanout
from calico.felix.messages import Encapsulation
from calico.model import IPPoolKey
from calico.model.values import IPPool
from calico.syncer.api import SyncStatus

_OFF = ("", "never")


class EncapsulationResolver:
    """Registers IPPoolKey and a status handler.

    Invariants: no output before the first InSync; at InSync exactly one ``on_encap_update``;
    afterwards one per pool update that changes the result (unchanged results are not
    re-sent). ``ipip_enabled``/``vxlan_enabled`` (Felix's IpInIpEnabled/VXLANEnabled, when
    set) override the pool-derived v4 values, as upstream; VXLAN v6 is always pool-derived.
    """

    def __init__(
        self,
        callbacks: PipelineCallbacks,
        *,
        ipip_enabled: bool | None = None,
        vxlan_enabled: bool | None = None,
    ) -> None:
        self._cb = callbacks
        self._ipip_override = ipip_enabled
        self._vxlan_override = vxlan_enabled
        self._ipip: set[IPPoolKey] = set()
        self._vxlan_v4: set[IPPoolKey] = set()
        self._vxlan_v6: set[IPPoolKey] = set()
        self._in_sync = False
        self._sent: Encapsulation | None = None

    def register(self, fanout: TypeFanout) -> None:
        fanout.register(IPPoolKey, self.on_pool)
        fanout.register_status_handler(self.on_status)

    def on_pool(self, key: IPPoolKey, value: IPPool | None) -> None:
        for pools in (self._ipip, self._vxlan_v4, self._vxlan_v6):
            pools.discard(key)
        if value is not None:
            v4 = isinstance(key.cidr, ipaddress.IPv4Network)
            if v4 and value.ipip_mode not in _OFF:
                self._ipip.add(key)  # IPIP is IPv4-only (validation rejects it on v6 pools)
            if value.vxlan_mode not in _OFF:
                (self._vxlan_v4 if v4 else self._vxlan_v6).add(key)
        self._maybe_send()

    def on_status(self, status: SyncStatus) -> None:
        if status is SyncStatus.IN_SYNC and not self._in_sync:
            self._in_sync = True
            self._maybe_send()

    def current(self) -> Encapsulation:
        ipip = self._ipip_override
        vxlan = self._vxlan_override
        return Encapsulation(
            ipip_enabled=bool(self._ipip) if ipip is None else ipip,
            vxlan_enabled=bool(self._vxlan_v4) if vxlan is None else vxlan,
            vxlan_enabled_v6=bool(self._vxlan_v6),
        )

    def _maybe_send(self) -> None:
        if not self._in_sync:
            return
        encap = self.current()
        if encap != self._sent:
            self._sent = encap
            self._cb.on_encap_update(encap)
