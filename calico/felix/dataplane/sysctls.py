"""Workload-interface and global sysctls, written under ``/proc/sys``.

Failures are returned (not raised) so the endpoint manager can mark the interface for retry: a
freshly created veth may not have its ``/proc/sys/net/*/conf/<iface>`` directory yet. Some writes
are best-effort (``warn_only``): ``accept_ra`` is attempted even when IPv6 is off and may not exist,
and ``proxy_delay`` is a latency nicety. Values are compared before writing so periodic reapplies
don't churn. ``/proc/sys/net`` is per network namespace: this writes the calling thread's netns.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

PROC_SYS = Path("/proc/sys")


@dataclass(frozen=True)
class Sysctl:
    path: str  # relative to /proc/sys, e.g. "net/ipv4/conf/cali1/proxy_arp"
    value: str
    warn_only: bool = False


@dataclass(frozen=True)
class SysctlError:
    path: str
    value: str
    error: str


def workload_iface_sysctls(
    iface: str, *, ipv4: bool, ipv6: bool, rp_filter: str | None
) -> list[Sysctl]:
    """What a workload interface needs (design/felix-netlink.md, "Sysctls"), in the order we
    write it.

    ``rp_filter`` is None when it could not be determined; the write is then skipped.
    """
    out = [Sysctl(f"net/ipv6/conf/{iface}/accept_ra", "0", warn_only=True)]
    if ipv4:
        out += [
            Sysctl(f"net/ipv4/conf/{iface}/route_localnet", "1"),
            Sysctl(f"net/ipv4/neigh/{iface}/proxy_delay", "0", warn_only=True),
            Sysctl(f"net/ipv4/conf/{iface}/proxy_arp", "1"),
            Sysctl(f"net/ipv4/conf/{iface}/forwarding", "1"),
        ]
        if rp_filter is not None:
            out.append(Sysctl(f"net/ipv4/conf/{iface}/rp_filter", rp_filter))
    if ipv6:
        out += [
            Sysctl(f"net/ipv6/conf/{iface}/proxy_ndp", "1"),
            Sysctl(f"net/ipv6/conf/{iface}/forwarding", "1"),
        ]
    return out


def global_sysctls(*, ip_forwarding: bool, ipv6: bool) -> list[Sysctl]:
    """Host-wide settings: forwarding when IPForwarding=Enabled, and conntrack accounting."""
    out = []
    if ip_forwarding:
        out.append(Sysctl("net/ipv4/ip_forward", "1"))
        if ipv6:
            out.append(Sysctl("net/ipv6/conf/all/forwarding", "1"))
    out.append(Sysctl("net/netfilter/nf_conntrack_acct", "1"))
    return out


def read_sysctl(path: str, *, root: Path = PROC_SYS) -> str | None:
    """The value, or None if it cannot be read. Plain ``os`` calls: a text-mode ``open`` (as
    ``Path.read_text`` does) cost ~85 us a file against ~7 us, and a new workload reads seven
    of them on its way to being reachable (design/performance.md "TTFR: one workload's
    delta")."""
    try:
        fd = os.open(os.path.join(root, path), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)


def write_sysctl(path: str, value: str, *, root: Path = PROC_SYS) -> str | None:
    """Set one sysctl if it differs; returns an error message or None."""
    if read_sysctl(path, root=root) == value:
        return None
    try:
        fd = os.open(os.path.join(root, path), os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)
    except OSError as e:
        return f"{e.strerror or e}"
    return None


def apply_sysctls(sysctls: list[Sysctl], *, root: Path = PROC_SYS) -> list[SysctlError]:
    errors = []
    for s in sysctls:
        err = write_sysctl(s.path, s.value, root=root)
        if err is None:
            continue
        if s.warn_only:
            log.warning("could not set %s=%s (ignored): %s", s.path, s.value, err)
        else:
            errors.append(SysctlError(s.path, s.value, err))
    return errors


def host_default_rp_filter(*, root: Path = PROC_SYS) -> str | None:
    return read_sysctl("net/ipv4/conf/default/rp_filter", root=root)


def configure_workload_iface(
    iface: str,
    *,
    ipv4: bool = True,
    ipv6: bool = False,
    allow_source_spoofing: bool = False,
    bpf_enabled: bool = False,
    root: Path = PROC_SYS,
) -> list[SysctlError]:
    """Write every per-interface sysctl; an empty list means the interface is configured.

    rp_filter follows the host default (``conf/default/rp_filter``) unless the workload may spoof
    source addresses or BPF mode does its own RPF check, in which case it is 0.
    """
    rp_filter: str | None = "0"
    errors: list[SysctlError] = []
    if ipv4 and not (allow_source_spoofing or bpf_enabled):
        rp_filter = host_default_rp_filter(root=root)
        if rp_filter is None:
            errors.append(
                SysctlError("net/ipv4/conf/default/rp_filter", "", "cannot read host default")
            )
    wanted = workload_iface_sysctls(iface, ipv4=ipv4, ipv6=ipv6, rp_filter=rp_filter)
    return errors + apply_sysctls(wanted, root=root)


def configure_global(
    *, ip_forwarding: bool = True, ipv6: bool = True, root: Path = PROC_SYS
) -> list[SysctlError]:
    return apply_sysctls(global_sysctls(ip_forwarding=ip_forwarding, ipv6=ipv6), root=root)
