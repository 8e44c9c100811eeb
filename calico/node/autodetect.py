"""IP autodetection: pick the address this node uses for BGP and tunnels.

Methods (``IP_AUTODETECTION_METHOD`` / ``IP6_AUTODETECTION_METHOD``): ``first-found`` (the
default), ``interface=<regex,...>``, ``skip-interface=<regex,...>``, ``cidr=<cidr,...>`` and
``can-reach=<host|ip>``. Everything works on a list of ``Interface`` so tests can supply a fake
host. Matching follows upstream: regexes are unanchored searches, interfaces are scanned from
the highest index down (upstream keeps that order for compatibility), and only global-unicast
addresses qualify.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
from collections.abc import Callable, Iterable, Sequence

from calico.node.errors import NodeError
from calico.node.interfaces import IfaceAddr, Interface

log = logging.getLogger(__name__)

# Interfaces that belong to containers, bridges, tunnels or Calico itself, never the host's
# real address (upstream's Linux list).
DEFAULT_INTERFACES_TO_EXCLUDE: tuple[str, ...] = (
    "^docker.*",
    "^cbr.*",
    "^dummy.*",
    "^podman.*",
    "^virbr.*",
    "^lxcbr.*",
    "^veth.*",
    "^lo",
    "^br-.*",
    "^cali.*",
    "^tunl.*",
    "^flannel.*",
    "^kube-ipvs.*",
    "^cni.*",
    r"^vxlan\.calico.*",
    r"^vxlan-v6\.calico.*",
    r"^wireguard\.cali.*",
    r"^wg-v6\.cali.*",
    "^nodelocaldns.*",
)

FIRST_FOUND = "first-found"
INTERFACE = "interface="
SKIP_INTERFACE = "skip-interface="
CIDR = "cidr="
CAN_REACH = "can-reach="
K8S_INTERNAL_IP = "kubernetes-internal-ip"

ListInterfaces = Callable[[], Sequence[Interface]]
Reach = Callable[[str, int], str]
_SPLIT = re.compile(r"\s*,\s*")


class DetectionError(Exception):
    """No usable address was found; the message says why."""


def _combined(patterns: Iterable[str]) -> re.Pattern[str] | None:
    pats = list(patterns)
    if not pats:
        return None
    try:
        return re.compile("(" + ")|(".join(pats) + ")")
    except re.error as exc:
        raise DetectionError(f"invalid interface regex in {pats}: {exc}") from None


def filter_interfaces(
    interfaces: Sequence[Interface],
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
    version: int | None = None,
) -> list[Interface]:
    """Interfaces whose name matches an include regex (if any) and no exclude regex, scanned
    from the last one down, each keeping only addresses of ``version`` (all when None)."""
    inc, exc = _combined(include), _combined(exclude)
    out = []
    for iface in reversed(list(interfaces)):
        if inc is not None and not inc.search(iface.name):
            continue
        if exc is not None and exc.search(iface.name):
            continue
        cidrs = iface.cidrs if version is None else iface.of_version(version)
        out.append(Interface(iface.name, iface.index, cidrs))
    return out


def is_global_unicast(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Go's net.IP.IsGlobalUnicast: private ranges count; link-local, loopback, multicast,
    unspecified and the IPv4 broadcast address do not."""
    if ip.is_unspecified or ip.is_loopback or ip.is_multicast or ip.is_link_local:
        return False
    return not (ip.version == 4 and ip == ipaddress.IPv4Address("255.255.255.255"))


def filtered_enumeration(
    interfaces: Sequence[Interface],
    include: Iterable[str],
    exclude: Iterable[str],
    cidrs: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network],
    version: int,
) -> tuple[Interface, IfaceAddr]:
    candidates = filter_interfaces(interfaces, include, exclude, version)
    if not candidates:
        raise DetectionError("no valid host interfaces found")
    for iface in candidates:
        for addr in iface.cidrs:
            if is_global_unicast(addr.ip) and (not cidrs or any(addr.ip in c for c in cidrs)):
                return iface, addr
    raise DetectionError(f"no valid IPv{version} addresses found on the host interfaces")


def udp_reach(dest: str, version: int) -> str:
    """The local address the kernel picks to reach ``dest`` (a UDP connect sends nothing)."""
    family = socket.AF_INET if version == 4 else socket.AF_INET6
    try:
        infos = socket.getaddrinfo(dest, 80, family, socket.SOCK_DGRAM)
    except socket.gaierror as exc:
        raise DetectionError(f"cannot resolve {dest} as IPv{version}: {exc.strerror}") from None
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(infos[0][4])
        except OSError as exc:
            raise DetectionError(f"cannot reach {dest}: {exc.strerror}") from None
        return str(sock.getsockname()[0]).split("%", 1)[0]


def reach_destination(
    dest: str, version: int, interfaces: Sequence[Interface], reach: Reach = udp_reach
) -> IfaceAddr:
    local = ipaddress.ip_address(reach(dest, version))
    for iface in filter_interfaces(interfaces, version=version):
        for addr in iface.cidrs:
            if addr.ip == local:
                return addr
    raise DetectionError(
        f"autodetected IPv{version} address does not match any addresses found on local "
        f"interfaces: {local}"
    )


def validate_method(method: str) -> None:
    """Reject an unknown method up front (upstream terminates on it)."""
    known = (INTERFACE, SKIP_INTERFACE, CIDR, CAN_REACH, K8S_INTERNAL_IP)
    if method in ("", FIRST_FOUND) or method.startswith(known):
        return
    raise NodeError(f"Invalid IP autodetection method: {method}")


def autodetect(
    method: str,
    version: int,
    list_ifaces: Callable[[], Sequence[Interface]],
    reach: Reach = udp_reach,
) -> IfaceAddr | None:
    """The detected address with its prefix, or None (logged) when nothing qualifies.

    Raises NodeError for an unknown method, as that is a configuration mistake, not a
    transient miss.
    """
    validate_method(method)
    try:
        if method in ("", FIRST_FOUND):
            iface, addr = filtered_enumeration(
                list_ifaces(), (), DEFAULT_INTERFACES_TO_EXCLUDE, (), version
            )
        elif method.startswith(INTERFACE):
            regexes = _SPLIT.split(method[len(INTERFACE) :])
            iface, addr = filtered_enumeration(list_ifaces(), regexes, (), (), version)
        elif method.startswith(SKIP_INTERFACE):
            regexes = _SPLIT.split(method[len(SKIP_INTERFACE) :])
            excl = (*DEFAULT_INTERFACES_TO_EXCLUDE, *regexes)
            iface, addr = filtered_enumeration(list_ifaces(), (), excl, (), version)
        elif method.startswith(CIDR):
            nets = []
            for text in _SPLIT.split(method[len(CIDR) :]):
                try:
                    nets.append(ipaddress.ip_network(text, strict=False))
                except ValueError:
                    log.error("Invalid CIDR %r for IP autodetection method: %s", text, method)
                    return None
            iface, addr = filtered_enumeration(list_ifaces(), (), (), nets, version)
        elif method.startswith(CAN_REACH):
            dest = method[len(CAN_REACH) :]
            addr = reach_destination(dest, version, list_ifaces(), reach)
            log.info("Using autodetected IPv%d address %s, reached %s", version, addr, dest)
            return addr
        else:  # kubernetes-internal-ip
            log.error("Cannot use method 'kubernetes-internal-ip' when not running on Kubernetes")
            return None
    except DetectionError as exc:
        log.warning("Unable to auto-detect an IPv%d address (%s): %s", version, method, exc)
        return None
    log.info("Using autodetected IPv%d address %s on interface %s", version, addr, iface.name)
    return addr


def local_cidr(ip: str, version: int, interfaces: Sequence[Interface]) -> str:
    """``ip`` with the prefix of the host interface carrying it; a CIDR or an address no
    interface has is returned unchanged."""
    if "/" in ip:
        return ip
    try:
        wanted = ipaddress.ip_address(ip)
    except ValueError:
        return ip
    for iface in filter_interfaces(interfaces, version=version):
        for addr in iface.cidrs:
            if addr.ip == wanted:
                log.info("Including CIDR information from host interface: %s", addr)
                return str(addr)
    log.warning("Unable to find matching host interface for IP %s", ip)
    return ip
