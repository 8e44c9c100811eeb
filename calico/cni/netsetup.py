"""The workload's Linux dataplane: a veth pair, addresses, routes and sysctls (pyroute2).

Layout (as upstream): the host end is ``cali…`` with MAC ``ee:ee:ee:ee:ee:ee``, proxy ARP/NDP
and forwarding on; the container end (CNI_IFNAME) has /32 and /128 addresses, a scope-link route
to 169.254.1.1 and default routes through it (IPv6: through the host end's link-local address).
So every packet leaves the pod towards the host, where Felix's routing and policy apply.

Work inside the container's netns runs in a helper thread that ``setns()``-es into it: netns is
per-thread on Linux, so netlink sockets and ``/proc/sys/net`` opened there belong to the pod,
and no child process is forked.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import importlib.util
import ipaddress
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from calico.cni.errors import DATAPLANE_FAILURE, UNKNOWN_CONTAINER, CNIError

HOST_MAC = "ee:ee:ee:ee:ee:ee"
GATEWAY_V4 = "169.254.1.1"
_CLONE_NEWNET = 0x40000000
_LL_WAIT_TRIES = 10
_LL_WAIT_INTERVAL = 0.05

IPInterface = ipaddress.IPv4Interface | ipaddress.IPv6Interface
T = TypeVar("T")


_lean_import = False


def use_lean_pyroute2() -> None:
    """For the plugin process only: import pyroute2's rtnetlink modules without its package
    ``__init__``, which loads every subsystem (IPDB, NDB, conntrack, …) for ~100 ms per call.

    Never used in a shared process (tests, daemons): there ``import pyroute2`` must stay whole.
    """
    global _lean_import
    _lean_import = True


def _prepare_import() -> None:
    if _lean_import and "pyroute2" not in sys.modules:
        spec = importlib.util.find_spec("pyroute2")
        if spec is not None and spec.loader is not None:
            sys.modules["pyroute2"] = importlib.util.module_from_spec(spec)  # not executed


def _iproute() -> Any:
    # Imported on use: VERSION, parse errors and DEL without a netns need no netlink at all.
    _prepare_import()
    from pyroute2.iproute.linux import IPRoute

    return IPRoute()


def _netlink_error() -> type[Exception]:
    _prepare_import()
    from pyroute2.netlink.exceptions import NetlinkError

    return NetlinkError


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


def _link_index(ipr: Any, name: str) -> int | None:
    found = ipr.link_lookup(ifname=name)
    return found[0] if found else None


def delete_host_link(name: str) -> bool:
    """Delete a host interface by name; False if it was not there."""
    return _delete_link(name)


def _delete_link(name: str) -> bool:
    """Delete the interface ``name`` in the current netns; False if it was not there."""
    nle = _netlink_error()
    with _iproute() as ipr:
        idx = _link_index(ipr, name)
        if idx is None:
            return False
        try:
            ipr.link("del", index=idx)
        except nle as exc:
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


def _wait_link_local(ipr: Any, index: int) -> str:
    from socket import AF_INET6

    for _ in range(_LL_WAIT_TRIES):
        for msg in ipr.get_addr(family=AF_INET6, index=index):
            addr = msg.get_attr("IFA_ADDRESS")
            if addr and addr.startswith("fe80:"):
                return str(addr)
        time.sleep(_LL_WAIT_INTERVAL)
    raise CNIError(DATAPLANE_FAILURE, "the host veth got no IPv6 link-local address in time")


def _container_link_up(ifname: str, v6: bool, allow_forwarding: bool) -> None:
    """Sysctls, then bring the pod end up (the host end only gets carrier, and so its IPv6
    link-local address, once both ends are up)."""
    forwarding = "1" if allow_forwarding else "0"
    write_sysctl("net/ipv4/ip_forward", forwarding)
    if v6:
        for conf in ("all", "default", "lo", ifname):
            write_sysctl(f"net/ipv6/conf/{conf}/disable_ipv6", "0")
        write_sysctl(f"net/ipv6/conf/{ifname}/accept_dad", "0")
        write_sysctl("net/ipv6/conf/all/forwarding", forwarding)
    with _iproute() as ipr:
        idx = _link_index(ipr, ifname)
        if idx is None:
            raise CNIError(DATAPLANE_FAILURE, f"container interface {ifname} vanished")
        ipr.link("set", index=idx, state="up")


def _container_addressing(
    ifname: str,
    addrs: Sequence[IPInterface],
    routes: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network],
    ipv6_gateway: str,
) -> tuple[int, str]:
    with _iproute() as ipr:
        idx = _link_index(ipr, ifname)
        if idx is None:
            raise CNIError(DATAPLANE_FAILURE, f"container interface {ifname} vanished")
        if any(a.version == 4 for a in addrs):
            ipr.route("add", dst=f"{GATEWAY_V4}/32", oif=idx, scope="link")
        for addr in addrs:
            ipr.addr(
                "add",
                index=idx,
                address=str(addr.ip),
                prefixlen=addr.ip.max_prefixlen,
                **({"flags": 0x02} if addr.version == 6 else {}),  # IFA_F_NODAD
            )
        for net in routes:
            if not any(a.version == net.version for a in addrs):
                continue
            gw = GATEWAY_V4 if net.version == 4 else ipv6_gateway
            ipr.route("add", dst=str(net), gateway=gw, oif=idx)
        mac = ipr.get_links(idx)[0].get_attr("IFLA_ADDRESS")
    return idx, str(mac)


def _host_route(ipr: Any, addr: IPInterface, index: int, host_ifname: str) -> None:
    nle = _netlink_error()
    dst = f"{addr.ip}/{addr.ip.max_prefixlen}"
    try:
        ipr.route("add", dst=dst, oif=index, scope="link")
    except nle as exc:
        if exc.code != errno.EEXIST:
            raise
        family = 10 if addr.version == 6 else 2
        existing = ipr.get_routes(family=family, dst=str(addr.ip), dst_len=addr.ip.max_prefixlen)
        for route in existing:
            oif = route.get_attr("RTA_OIF")
            if oif == index:
                return
            other = ipr.get_links(oif)[0].get_attr("IFLA_IFNAME") if oif else "?"
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
    nle = _netlink_error()
    try:
        nsfd = os.open(netns, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise CNIError(
            UNKNOWN_CONTAINER, f"network namespace {netns} does not exist", str(exc)
        ) from None
    created = False
    try:
        with _iproute() as ipr:
            stale = _link_index(ipr, host_ifname)
            if stale is not None:
                ipr.link("del", index=stale)
            extra: dict[str, Any] = {"mtu": mtu} if mtu else {}
            if num_queues > 1:
                extra.update(num_tx_queues=num_queues, num_rx_queues=num_queues)
            try:
                ipr.link(
                    "add",
                    ifname=host_ifname,
                    kind="veth",
                    address=HOST_MAC,
                    peer={"ifname": ifname, "net_ns_fd": nsfd, **extra},
                    **extra,
                )
            except nle as exc:
                if exc.code == errno.EEXIST:
                    raise CNIError(
                        DATAPLANE_FAILURE,
                        f"container veth name provided ({ifname}) already exists",
                    ) from None
                raise
            created = True
            index = _link_index(ipr, host_ifname)
            if index is None:
                raise CNIError(DATAPLANE_FAILURE, f"host veth {host_ifname} vanished")
            _host_sysctls(host_ifname, v4, v6)
            ipr.link("set", index=index, state="up")
            in_netns(netns, lambda: _container_link_up(ifname, v6, allow_forwarding))
            gw6 = _wait_link_local(ipr, index) if v6 else ""
            cidx, cmac = in_netns(netns, lambda: _container_addressing(ifname, addrs, routes, gw6))
            for addr in addrs:
                _host_route(ipr, addr, index, host_ifname)
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
        return in_netns(netns, lambda: _delete_link(ifname))
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

    def inside() -> tuple[set[str], bool]:
        with _iproute() as ipr:
            idx = _link_index(ipr, ifname)
            if idx is None:
                raise CNIError(DATAPLANE_FAILURE, f"interface {ifname} not found in {netns}")
            up = bool(ipr.get_links(idx)[0]["flags"] & 1)
            addrs = {
                f"{m.get_attr('IFA_ADDRESS')}/{m['prefixlen']}"
                for m in ipr.get_addr(index=idx)
                if not str(m.get_attr("IFA_ADDRESS")).startswith("fe80:")
            }
        return addrs, up

    addrs, up = in_netns(netns, inside)
    with _iproute() as ipr:
        idx = _link_index(ipr, host_ifname)
        if idx is None:
            raise CNIError(DATAPLANE_FAILURE, f"host interface {host_ifname} not found")
        link = ipr.get_links(idx)[0]
        host_up = bool(link["flags"] & 1)
        mac = str(link.get_attr("IFLA_ADDRESS"))
    return Observed(addrs, up, host_up, mac)
