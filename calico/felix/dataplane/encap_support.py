"""Tunnel kinds this kernel lacks (IPIP, WireGuard): a clear, non-fatal error when an IP pool
or the config asks for them, and everything else keeps working (upstream: the IPIP manager
retries with warnings, WireGuard is marked unsupported; design/felix-dataplane.md "Unsupported
tunnels"). Felix never loads modules itself.

Support is probed once per kind: a loaded (or built-in) module shows in ``/sys/module``;
otherwise creating a throwaway link of that kind tells (``Unknown device type`` /
``EOPNOTSUPP`` = unsupported; success = supported, and the link is removed again).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable
from typing import Any

from calico.felix.messages import Encapsulation, ToDataplane

log = logging.getLogger(__name__)

MODULES = {"ipip": "ipip", "wireguard": "wireguard"}


def probe_link_kind(kind: str, netns: str | None = None) -> bool:
    """Whether the kernel can create a ``kind`` link (in ``netns`` when given)."""
    if os.path.isdir(f"/sys/module/{MODULES.get(kind, kind)}"):
        return True
    from pyroute2 import IPRoute, NetlinkError

    name = f"calprb{uuid.uuid4().hex[:8]}"
    kwargs: dict[str, Any] = {"netns": netns, "flags": 0} if netns else {}
    with IPRoute(**kwargs) as ipr:
        try:
            ipr.link("add", ifname=name, kind=kind)
        except NetlinkError as e:
            if e.code in (95, 22):  # EOPNOTSUPP; EINVAL carries "Unknown device type"
                return False
            log.debug("probe of %s links failed: %s", kind, e)
            return False
        try:
            ipr.link("del", ifname=name)
        except NetlinkError:
            log.warning("Could not remove probe link %s", name)
        return True


class TunnelSupportReporter:
    """A manager that only reports: ``problems`` holds the current error texts."""

    def __init__(
        self,
        *,
        wireguard_v4: bool = False,
        wireguard_v6: bool = False,
        probe: Callable[[str], bool] = probe_link_kind,
    ) -> None:
        self._probe = probe
        self._support: dict[str, bool] = {}
        self._ipip_wanted = False
        self.problems: list[str] = []
        for on, what in ((wireguard_v4, "WireguardEnabled"), (wireguard_v6, "WireguardEnabledV6")):
            if on and not self._supported("wireguard"):
                self._report(
                    f"{what} is set but this kernel has no 'wireguard' module: WireGuard "
                    "encryption is not available; traffic is sent unencrypted"
                )

    def _supported(self, kind: str) -> bool:
        if kind not in self._support:
            try:
                self._support[kind] = self._probe(kind)
            except Exception as e:
                log.warning("Could not probe kernel support for %s: %s", kind, e)
                self._support[kind] = False
        return self._support[kind]

    def _report(self, text: str) -> None:
        log.error("%s", text)
        self.problems.append(text)

    def on_update(self, msg: ToDataplane) -> None:
        if isinstance(msg, Encapsulation) and msg.ipip_enabled != self._ipip_wanted:
            self._ipip_wanted = msg.ipip_enabled
            if msg.ipip_enabled and not self._supported("ipip"):
                self._report(
                    "An IP pool (ipipMode) or IpInIpEnabled asks for IPIP but this kernel has "
                    "no 'ipip' module: IPIP routes are not programmed (use vxlanMode instead)"
                )

    def complete_deferred_work(self) -> None:
        return


__all__ = ["TunnelSupportReporter", "probe_link_kind"]
