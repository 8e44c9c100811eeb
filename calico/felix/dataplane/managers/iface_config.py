"""Per-workload-interface sysctls, written when the interface is oper-up, retried on failure.

A freshly created veth may not have its ``/proc/sys/net/*/conf/<iface>`` directory yet, so a
failed write leaves the interface pending and the loop's retry timer tries again; meanwhile the
endpoint reports "down" (upstream does the same).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from calico.felix.dataplane.sysctls import SysctlError, configure_workload_iface

log = logging.getLogger(__name__)

Writer = Callable[..., list[SysctlError]]


@dataclass
class _Wanted:
    ipv4: bool
    ipv6: bool


class WorkloadIfaceConfigurator:
    def __init__(
        self, *, ipv6_enabled: bool = True, writer: Writer = configure_workload_iface
    ) -> None:
        self._ipv6 = ipv6_enabled
        self._writer = writer
        self._wanted: dict[str, _Wanted] = {}
        self._up: set[str] = set()
        self._pending: set[str] = set()
        self._failing: set[str] = set()

    def want(self, iface: str, *, ipv4: bool, ipv6: bool) -> None:
        w = _Wanted(ipv4 or not ipv6, ipv6 and self._ipv6)
        if self._wanted.get(iface) != w:
            self._wanted[iface] = w
            if iface in self._up:
                self._pending.add(iface)

    def forget(self, iface: str) -> None:
        self._wanted.pop(iface, None)
        self._pending.discard(iface)
        self._failing.discard(iface)

    def on_iface_state(self, iface: str, state: str) -> None:
        if state == "up":
            if iface not in self._up:
                self._up.add(iface)
                self._pending.add(iface)
        else:
            self._up.discard(iface)
            self._pending.discard(iface)
            self._failing.discard(iface)

    @property
    def has_pending(self) -> bool:
        return any(i in self._wanted for i in self._pending)

    def failing(self, iface: str) -> bool:
        return iface in self._failing

    def apply(self) -> bool:
        """Configure every pending, wanted, up interface; True if nothing is left to retry."""
        for iface in sorted(self._pending):
            w = self._wanted.get(iface)
            if w is None:
                continue  # not (yet) a workload we know: configure once it is
            errors = self._writer(iface, ipv4=w.ipv4, ipv6=w.ipv6)
            if errors:
                log.warning("Failed to configure interface %s (will retry): %s", iface, errors)
                self._failing.add(iface)
                continue
            self._failing.discard(iface)
            self._pending.discard(iface)
        return not self.has_pending
