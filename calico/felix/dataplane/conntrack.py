"""Flush conntrack entries that involve given IPs, over ctnetlink (pyroute2 ``Conntrack``).

Why: when a workload IP is removed or moves to another interface, established flows keep their
old conntrack state (and NAT bindings) and would bypass the new policy or blackhole. Upstream runs
``conntrack -D`` four times per IP (orig/reply x src/dst); we do the equivalent with one dump per
address family, matching any of the four fields in userspace, then delete each match by its
original tuple (plus zone). Userspace matching avoids relying on the kernel's dump filters, whose
reply-tuple support is recent. Entries that vanish in between (ENOENT) are not errors.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class FlushResult:
    deleted: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _group_by_family(ips: Iterable[str]) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for ip in ips:
        addr = ipaddress.ip_address(ip.split("/", 1)[0])
        fam = socket.AF_INET if addr.version == 4 else socket.AF_INET6
        out.setdefault(fam, set()).add(str(addr))
    return out


def _norm(addr: Any) -> str | None:
    if addr is None:
        return None
    try:
        return str(ipaddress.ip_address(addr))
    except ValueError:
        return None


def entry_matches(entry: Any, ips: set[str]) -> bool:
    """True if the IP appears as source or destination in either direction of the entry."""
    for tup in (entry.tuple_orig, entry.tuple_reply):
        if tup is None:
            continue
        if _norm(tup.saddr) in ips or _norm(tup.daddr) in ips:
            return True
    return False


def flush_ips(ips: Iterable[str], *, netns: str | None = None) -> FlushResult:
    """Delete every conntrack entry whose original or reply tuple mentions one of ``ips``."""
    from pyroute2 import Conntrack, NetlinkError

    ips = list(ips)
    result = FlushResult()
    for family, wanted in _group_by_family(ips).items():
        kwargs: dict[str, Any] = {"nfgen_family": family}
        if netns is not None:
            kwargs.update(netns=netns, flags=0)
        try:
            ct = Conntrack(**kwargs)
        except OSError as e:
            result.errors.append(f"open ctnetlink: {e}")
            continue
        try:
            matches = [e for e in ct.dump_entries() if entry_matches(e, wanted)]
            for entry in matches:
                try:
                    extra = {"zone": entry.zone} if entry.zone else {}
                    ct.entry("del", tuple_orig=entry.tuple_orig, **extra)
                    result.deleted += 1
                except NetlinkError as e:
                    if e.code != errno.ENOENT:
                        result.errors.append(f"delete {entry.tuple_orig}: {e}")
        except (NetlinkError, OSError) as e:
            result.errors.append(f"dump conntrack: {e}")
        finally:
            ct.close()
    if result.deleted:
        log.info("flushed %d conntrack entries for %s", result.deleted, sorted(set(ips)))
    return result
