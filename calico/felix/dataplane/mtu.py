"""Host MTU detection, tunnel/pod MTUs and the MTU file the CNI plugin reads
(design/felix-dataplane.md "MTU"; upstream int_dataplane.go).

Once, when the dataplane is built: host MTU = smallest MTU of the oper-up links whose name
matches ``MTUIfacePattern`` (none -> 1460 and a warning); each encapsulation's MTU is its
configured value or host MTU minus its overhead; the pod MTU is the smallest over the
*enabled* encapsulations (none -> host MTU); it is written, decimal with no newline, mode
0644, to ``MTUFilePath`` (default ``/var/lib/calico/mtu``) for the CNI plugin.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_HOST_MTU = 1460
DEFAULT_MTU_FILE = "/var/lib/calico/mtu"
OVERHEAD = {"ipip": 20, "vxlan": 50, "vxlan_v6": 70, "wireguard": 60, "wireguard_v6": 80}


@dataclass(frozen=True)
class LinkMTU:
    name: str
    mtu: int
    oper_up: bool


def find_host_mtu(links: Iterable[LinkMTU], pattern: re.Pattern[str] | None) -> int:
    mtus = [
        link.mtu
        for link in links
        if link.oper_up and link.mtu > 0 and (pattern is None or pattern.search(link.name))
    ]
    if not mtus:
        log.warning(
            "No oper-up interface matches MTUIfacePattern %r; assuming host MTU %d",
            pattern.pattern if pattern is not None else None,
            DEFAULT_HOST_MTU,
        )
        return DEFAULT_HOST_MTU
    return min(mtus)


@dataclass(frozen=True)
class MTUs:
    host: int
    ipip: int
    vxlan: int
    vxlan_v6: int
    wireguard: int
    wireguard_v6: int

    def pod_mtu(
        self,
        *,
        ipip: bool,
        vxlan: bool,
        vxlan_v6: bool,
        wireguard: bool = False,
        wireguard_v6: bool = False,
    ) -> int:
        """The smallest MTU of the enabled encapsulations, else the host MTU."""
        enabled = [
            mtu
            for on, mtu in (
                (ipip, self.ipip),
                (vxlan, self.vxlan),
                (vxlan_v6, self.vxlan_v6),
                (wireguard, self.wireguard),
                (wireguard_v6, self.wireguard_v6),
            )
            if on
        ]
        pod = min(enabled) if enabled else self.host
        if pod > self.host:
            log.warning("Pod MTU %d is larger than the host MTU %d", pod, self.host)
        return pod


def encap_mtus(
    host: int,
    *,
    ipip: int = 0,
    vxlan: int = 0,
    vxlan_v6: int = 0,
    wireguard: int = 0,
    wireguard_v6: int = 0,
) -> MTUs:
    """Configured MTUs, each 0 (unset) replaced by host MTU minus that encap's overhead."""

    def pick(value: int, kind: str) -> int:
        return value if value > 0 else host - OVERHEAD[kind]

    return MTUs(
        host=host,
        ipip=pick(ipip, "ipip"),
        vxlan=pick(vxlan, "vxlan"),
        vxlan_v6=pick(vxlan_v6, "vxlan_v6"),
        wireguard=pick(wireguard, "wireguard"),
        wireguard_v6=pick(wireguard_v6, "wireguard_v6"),
    )


def write_mtu_file(path: str | os.PathLike[str], mtu: int) -> None:
    """Atomically write ``mtu`` (no newline, mode 0644), creating the directory."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".mtu.", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(str(mtu))
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


__all__ = [
    "DEFAULT_HOST_MTU",
    "DEFAULT_MTU_FILE",
    "LinkMTU",
    "MTUs",
    "encap_mtus",
    "find_host_mtu",
    "write_mtu_file",
]
