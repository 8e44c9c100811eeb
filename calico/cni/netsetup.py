"""The workload's Linux dataplane: a veth pair, addresses, routes and sysctls (rtnetlink).

Layout (as upstream): the host end is ``cali…`` with MAC ``ee:ee:ee:ee:ee:ee``, proxy ARP/NDP
and forwarding on; the container end (CNI_IFNAME) has /32 and /128 addresses, a scope-link route
to 169.254.1.1 and default routes through it (IPv6: through the host end's link-local address).
So every packet leaves the pod towards the host, where Felix's routing and policy apply.

Netlink goes through :mod:`calico.cni.rtnl` (standard library only; pyroute2's import alone
would cost more than the kernel work). One socket per namespace serves a whole call: the pod's
is opened by a helper thread that ``setns()``-es into the pod's netns (netns is per-thread on
Linux, and a socket stays in the namespace it was created in), which also writes the pod's
``/proc/sys/net`` sysctls; no child process is forked.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import ipaddress
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from calico.cni.errors import DATAPLANE_FAILURE, UNKNOWN_CONTAINER, CNIError
from calico.cni.rtnl import RTNL, NetlinkError

HOST_MAC = "ee:ee:ee:ee:ee:ee"
GATEWAY_V4 = "169.254.1.1"
_CLONE_NEWNET = 0x40000000
_LL_WAIT_TRIES = 10
_LL_WAIT_INTERVAL = 0.05

IPInterface = ipaddress.IPv4Interface | ipaddress.IPv6Interface
T = TypeVar("T")


def in_netns(path: str, fn: Callable[[], T]) -> T:
    """Run ``fn`` in a thread that has joined the network namespace at ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise CNIError(UNKNOWN_CONTAINER, f"network namespace {path} does not exist") from None
    except OSError as exc:
        raise CNIError(
            UNKNOWN_CONTAINER, f"cannot open network namespace {path}", str(exc)
        ) from None
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(fd, _CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise CNIError(
                    UNKNOWN_CONTAINER, f"cannot enter network namespace {path}", os.strerror(err)
                )
            box["value"] = fn()
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    try:
        thread = threading.Thread(target=target, name="netns")
        thread.start()
        thread.join()
    finally:
        os.close(fd)
    if "error" in box:
        raise box["error"]
    return box["value"]


def write_sysctl(path: str, value: str) -> None:
    with open(f"/proc/sys/{path}", "w") as f:
        f.write(value)


def _ipv6_available() -> bool:
    return os.path.exists("/proc/sys/net/ipv6")


@dataclass
class SetupResult:
    host_ifname: str
    host_index: int
    container_mac: str
    container_index: int
    ipv6_gateway: str = ""


def delete_host_link(name: str) -> bool:
    """Delete a host interface by name; False if it was not there."""
    with RTNL() as nl:
        return _delete_link(nl, name)


def _delete_link(nl: RTNL, name: str) -> bool:
    """Delete the interface ``name`` in ``nl``'s netns; False if it was not there."""
    idx = nl.link_index(name)
    if idx is None:
        return False
    try:
        nl.link_delete(idx)
    except NetlinkError as exc:
        if exc.code != errno.ENODEV:
            raise
        return False
    return True


def _host_sysctls(ifname: str, v4: bool, v6: bool) -> None:
    if v4:
        write_sysctl(f"net/ipv4/conf/{ifname}/route_localnet", "1")
        write_sysctl(f"net/ipv4/neigh/{ifname}/proxy_delay", "0")
        write_sysctl(f"net/ipv4/conf/{ifname}/proxy_arp", "1")
        write_sysctl(f"net/ipv4/conf/{ifname}/forwarding", "1")
    if v6:
        write_sysctl(f"net/ipv6/conf/{ifname}/accept_dad", "0")
        write_sysctl(f"net/ipv6/conf/{ifname}/disable_ipv6", "0")
        write_sysctl(f"net/ipv6/conf/{ifname}/proxy_ndp", "1")
        write_sysctl(f"net/ipv6/conf/{ifname}/forwarding", "1")
        write_sysctl(f"net/ipv6/conf/{ifname}/accept_ra", "0")


def _wait_link_local(nl: RTNL, index: int) -> str:
    for _ in range(_LL_WAIT_TRIES):
        for addr, _plen in nl.addrs(index, socket.AF_INET6):
            if addr.startswith("fe80:"):
                return addr
        time.sleep(_LL_WAIT_INTERVAL)
    raise CNIError(DATAPLANE_FAILURE, "the host veth got no IPv6 link-local address in time")


def _enter_pod(ifname: str, v6: bool, allow_forwarding: bool) -> RTNL:
    """In the pod's netns: its sysctls, then the netlink socket the rest of the call uses."""
    forwarding = "1" if allow_forwarding else "0"
    write_sysctl("net/ipv4/ip_forward", forwarding)
    if v6:
        for conf in ("all", "default", "lo", ifname):
            write_sysctl(f"net/ipv6/conf/{conf}/disable_ipv6", "0")
        write_sysctl(f"net/ipv6/conf/{ifname}/accept_dad", "0")
        write_sysctl("net/ipv6/conf/all/forwarding", forwarding)
    return RTNL()


def _container_addressing(
    nl: RTNL,
    idx: int,
    addrs: Sequence[IPInterface],
    routes: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network],
    ipv6_gateway: str,
) -> str:
    """Gateway route, addresses and routes on the pod end; returns its MAC."""
    if any(a.version == 4 for a in addrs):
        nl.route_add(ipaddress.ip_network(f"{GATEWAY_V4}/32"), idx, scope_link=True)
    for addr in addrs:
        nl.addr_add(idx, addr.ip, addr.ip.max_prefixlen, nodad=addr.version == 6)
    for net in routes:
        if not any(a.version == net.version for a in addrs):
            continue
        gw = GATEWAY_V4 if net.version == 4 else ipv6_gateway
        nl.route_add(net, idx, gateway=gw)
    link = nl.link_by_index(idx)
    if link is None:
        raise CNIError(DATAPLANE_FAILURE, f"container interface {idx} vanished")
    return link.mac


def _host_route(nl: RTNL, addr: IPInterface, index: int, host_ifname: str) -> None:
    dst = ipaddress.ip_network(f"{addr.ip}/{addr.ip.max_prefixlen}")
    try:
        nl.route_add(dst, index, scope_link=True)
    except NetlinkError as exc:
        if exc.code != errno.EEXIST:
            raise
        family = socket.AF_INET6 if addr.version == 6 else socket.AF_INET
        existing = [
            r for r in nl.routes(family) if r.dst == str(addr.ip) and r.dst_len == dst.prefixlen
        ]
        for route in existing:
            if route.oif == index:
                return
            other_link = nl.link_by_index(route.oif) if route.oif else None
            other = other_link.name if other_link else "?"
            raise CNIError(
                DATAPLANE_FAILURE,
                f"route {dst} already exists for interface {other}",
                f"cannot add it for {host_ifname}; another workload may hold this address",
            ) from None
        raise


def setup(
    netns: str,
    ifname: str,
    host_ifname: str,
    addrs: Sequence[IPInterface],
    routes: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network],
    mtu: int = 0,
    allow_forwarding: bool = False,
    num_queues: int = 1,
) -> SetupResult:
    """Create and configure the pair; on failure the half-built host end is removed."""
    v4 = any(a.version == 4 for a in addrs)
    v6 = any(a.version == 6 for a in addrs)
    if v6 and not _ipv6_available():
        raise CNIError(DATAPLANE_FAILURE, "IPv6 is disabled on this host")
    try:
        nsfd = os.open(netns, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise CNIError(
            UNKNOWN_CONTAINER, f"network namespace {netns} does not exist", str(exc)
        ) from None
    created = False
    try:
        with RTNL() as host:
            stale = host.link_index(host_ifname)
            if stale is not None:
                host.link_delete(stale)
            try:
                host.veth_add(host_ifname, HOST_MAC, ifname, nsfd, mtu=mtu, num_queues=num_queues)
            except NetlinkError as exc:
                if exc.code == errno.EEXIST:
                    raise CNIError(
                        DATAPLANE_FAILURE,
                        f"container veth name provided ({ifname}) already exists",
                    ) from None
                raise
            created = True
            index = host.link_index(host_ifname)
            if index is None:
                raise CNIError(DATAPLANE_FAILURE, f"host veth {host_ifname} vanished")
            _host_sysctls(host_ifname, v4, v6)
            host.link_up(index)
            # The pod end goes up after the host end: the host end only gets carrier, and so
            # its IPv6 link-local address, once both ends are up.
            with in_netns(netns, lambda: _enter_pod(ifname, v6, allow_forwarding)) as pod:
                cidx = pod.link_index(ifname)
                if cidx is None:
                    raise CNIError(DATAPLANE_FAILURE, f"container interface {ifname} vanished")
                pod.link_up(cidx)
                gw6 = _wait_link_local(host, index) if v6 else ""
                cmac = _container_addressing(pod, cidx, addrs, routes, gw6)
            for addr in addrs:
                _host_route(host, addr, index, host_ifname)
        return SetupResult(host_ifname, index, cmac, cidx, gw6)
    except BaseException:
        if created:
            with contextlib.suppress(Exception):
                delete_host_link(host_ifname)
        raise
    finally:
        os.close(nsfd)


def teardown(netns: str, ifname: str) -> bool:
    """Delete ``ifname`` inside ``netns`` (its host peer goes with it); False if absent."""
    if not netns or not os.path.exists(netns):
        return False
    try:
        with in_netns(netns, RTNL) as pod:
            return _delete_link(pod, ifname)
    except CNIError as exc:
        if exc.code == UNKNOWN_CONTAINER:
            return False
        raise


@dataclass
class Observed:
    container_addrs: set[str]
    container_up: bool
    host_up: bool
    host_mac: str


def observe(netns: str, ifname: str, host_ifname: str) -> Observed:
    """What exists now, for CHECK."""
    with in_netns(netns, RTNL) as pod:
        link = pod.link_by_name(ifname)
        if link is None:
            raise CNIError(DATAPLANE_FAILURE, f"interface {ifname} not found in {netns}")
        addrs = {f"{a}/{plen}" for a, plen in pod.addrs(link.index) if not a.startswith("fe80:")}
    with RTNL() as host:
        host_link = host.link_by_name(host_ifname)
        if host_link is None:
            raise CNIError(DATAPLANE_FAILURE, f"host interface {host_ifname} not found")
    return Observed(addrs, link.up, host_link.up, host_link.mac)
