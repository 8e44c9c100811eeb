"""Which host endpoint each host interface enforces: one function shared by the nftables
endpoint manager and the BPF one, so that in BPF mode both sides agree on which interfaces
BPF polices (design/felix-bpf.md "Host endpoints")."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping

from calico.felix.messages import HostEndpoint, HostEndpointID

# The key the all-interfaces (``interfaceName: "*"``) endpoint is resolved under, and the suffix
# of its chains (upstream's name): longer than IFNAMSIZ, so no real interface can clash with it.
ALL_INTERFACES = "any-interface-at-all"


def normalise_addr(text: str) -> str:
    """An interface address (``10.0.0.1/24`` or bare) -> its IP as text."""
    return str(ipaddress.ip_interface(text.strip()).ip)


def resolve_host_endpoints(
    heps: Mapping[HostEndpointID, HostEndpoint],
    iface_addrs: Mapping[str, set[str]],
    is_workload_iface: Callable[[str], bool],
) -> dict[str, HostEndpoint]:
    """Interface -> host endpoint, walking endpoints in ID order (the first to claim an
    interface keeps it): by name, else (name empty) every non-workload interface holding one
    of its expected IPs. ``*`` endpoints are not resolved here (each dataplane applies
    :func:`all_interfaces_endpoint` where none is); ``iface_addrs`` holds normalised addresses
    (:func:`normalise_addr`)."""
    out: dict[str, HostEndpoint] = {}
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


def all_interfaces_endpoint(heps: Mapping[HostEndpointID, HostEndpoint]) -> HostEndpoint | None:
    """The all-interfaces (``*``) endpoint in force: the lowest ID's, as upstream picks it."""
    wild = [i for i in sorted(heps) if heps[i].name == "*"]
    return heps[wild[0]] if wild else None
