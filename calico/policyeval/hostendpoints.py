"""Which host endpoint each host interface enforces. Felix's nftables and BPF endpoint managers
and ``calicoctl explain`` all resolve with these functions, so the dataplane and the explained
verdict agree on which endpoint polices an interface (design/felix-rules.md "The
all-interfaces host endpoint", design/explain.md "Host endpoints")."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol, TypeVar


class HostEndpointLike(Protocol):
    """What resolution reads of a host endpoint (Felix's message and the v1 value both fit)."""

    @property
    def name(self) -> str: ...
    @property
    def expected_ipv4_addrs(self) -> tuple[str, ...]: ...
    @property
    def expected_ipv6_addrs(self) -> tuple[str, ...]: ...


H = TypeVar("H", bound=HostEndpointLike)
K = TypeVar("K", bound=Any)  # an orderable endpoint ID: ID order decides who claims first


def normalise_addr(text: str) -> str:
    """An interface address (``10.0.0.1/24`` or bare) -> its IP as text."""
    return str(ipaddress.ip_interface(text.strip()).ip)


def resolve_host_endpoints(
    heps: Mapping[K, H],
    iface_addrs: Mapping[str, set[str]],
    is_workload_iface: Callable[[str], bool],
) -> dict[str, H]:
    """Interface -> host endpoint, walking endpoints in ID order (the first to claim an
    interface keeps it): by name, else (name empty) every non-workload interface holding one
    of its expected IPs. ``*`` endpoints are not resolved here (each dataplane applies
    :func:`all_interfaces_endpoint` where none is); ``iface_addrs`` holds normalised addresses
    (:func:`normalise_addr`)."""
    out: dict[str, H] = {}
    for hep_id in sorted(heps):
        hep = heps[hep_id]
        if hep.name == "*":
            continue
        if hep.name:
            out.setdefault(hep.name, hep)
            continue
        wanted = {normalise_addr(a) for a in (*hep.expected_ipv4_addrs, *hep.expected_ipv6_addrs)}
        for iface, addrs in sorted(iface_addrs.items()):
            if wanted & addrs and not is_workload_iface(iface):
                out.setdefault(iface, hep)
    return out


def all_interfaces_endpoint(heps: Mapping[K, H]) -> H | None:
    """The all-interfaces (``*``) endpoint in force: the lowest ID's, as upstream picks it."""
    wild = [i for i in sorted(heps) if heps[i].name == "*"]
    return heps[wild[0]] if wild else None


def endpoint_holding(heps: Mapping[K, H], addr: str) -> H | None:
    """Of one node's endpoints, the one Felix enforces on the interface holding ``addr`` (an
    address, not an interface, is all explain knows): a named endpoint's interface is taken
    to hold its expected IPs, an interface no named one claims holds the others; the named
    and expected-IP endpoints claim interfaces first (:func:`resolve_host_endpoints`), the
    ``*`` one takes what is left."""
    addr = normalise_addr(addr)
    iface_addrs: dict[str, set[str]] = {}
    for hep in heps.values():
        if hep.name and hep.name != "*":
            ips = (*hep.expected_ipv4_addrs, *hep.expected_ipv6_addrs)
            iface_addrs.setdefault(hep.name, set()).update(normalise_addr(a) for a in ips)
    holders = sorted(i for i, addrs in iface_addrs.items() if addr in addrs)
    if not holders:
        holders = [f"({addr})"]  # unnamed: no interface name is that (IFNAMSIZ, no parens)
        iface_addrs[holders[0]] = {addr}
    resolved = resolve_host_endpoints(heps, iface_addrs, lambda _iface: False)
    return resolved.get(holders[0]) or all_interfaces_endpoint(heps)


class CrossingUnknown(ValueError):
    """Several host interfaces with endpoints could carry a node's forwarded traffic."""

    def __init__(self, interfaces: list[str], node: str = "") -> None:
        self.interfaces = interfaces
        self.node = node
        names = ", ".join(interfaces)
        super().__init__(f"several host endpoints' interfaces could carry it: {names}")


def crossed_endpoint(
    heps: Mapping[K, H], via: str | None = None, not_on: Collection[str] = ()
) -> H | None:
    """Of one node's endpoints, the one on the host interface a packet between the node and
    the outside crosses (explain has no routes): ``via``'s endpoint when the interface is
    given (the lowest-ID endpoint named so, else ``*``); otherwise the one named or
    expected-IP endpoint (the uplink), else ``*``, else None. Two or more of them leave it
    open (:class:`CrossingUnknown`); expected-IP endpoints count as an interface each, named
    ones as one per name. Endpoints named for an interface in ``not_on`` are no uplink (the
    tunnel devices, when the route is known to take the uplink)."""
    ids = sorted(heps)
    if via is not None:
        named = [heps[i] for i in ids if heps[i].name == via]
        return named[0] if named else all_interfaces_endpoint(heps)
    uplinks: dict[str, H] = {}
    for i in ids:
        hep = heps[i]
        if hep.name != "*" and hep.name not in not_on:
            uplinks.setdefault(hep.name or f"({', '.join(_expected(hep))})", hep)
    if len(uplinks) > 1:
        raise CrossingUnknown(sorted(uplinks))
    if uplinks:
        return next(iter(uplinks.values()))
    return all_interfaces_endpoint(heps)


def _expected(hep: HostEndpointLike) -> list[str]:
    return [*hep.expected_ipv4_addrs, *hep.expected_ipv6_addrs]
