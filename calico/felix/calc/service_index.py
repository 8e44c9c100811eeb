"""ServiceIndex: the members of the ``svc:`` / ``svcnoport:`` IP sets that rules with
``services: {name, namespace}`` use, from Kubernetes EndpointSlices (upstream's
felix/serviceindex; design/felix-calc-nodes.md "ServiceIndex").

An EndpointSlice belongs to the service ``<its namespace>/<label kubernetes.io/service-name>``.
A ``svcnoport:`` set (source match) holds every endpoint address as a host CIDR; a ``svc:`` set
(destination match) holds ``address,proto:port`` for each of the slice's ports that has a
number (protocol TCP when unset). Endpoint readiness is not consulted, as upstream.
Members are reference-counted across slices, so an address two slices share never flaps, and
each change emits only the net difference.
"""

from __future__ import annotations

import ipaddress
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from calico.model import ResourceKey

log = logging.getLogger(__name__)

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
ENDPOINT_SLICE_KIND = "KubernetesEndpointSlice"

MemberCallback = Callable[[str, str], None]


@dataclass(frozen=True, slots=True)
class _Slice:
    service: str  # "<ns>/<name>", "" when the slice names no service
    addresses: tuple[str, ...]  # host CIDRs
    ports: tuple[str, ...]  # "tcp:80" ...


def _host_cidr(address: str) -> str | None:
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return None
    return f"{ip}/{ip.max_prefixlen}"


def parse_slice(namespace: str, value: Mapping[str, Any]) -> _Slice:
    """The parts of an EndpointSlice a service set needs (junk addresses/ports skipped)."""
    labels = (value.get("metadata") or {}).get("labels") or {}
    name = labels.get(SERVICE_NAME_LABEL, "")
    addresses: list[str] = []
    for endpoint in value.get("endpoints") or ():
        for address in endpoint.get("addresses") or ():
            if (cidr := _host_cidr(str(address))) is not None and cidr not in addresses:
                addresses.append(cidr)
            elif cidr is None:
                log.warning("Ignoring bad EndpointSlice address %r", address)
    ports: list[str] = []
    for port in value.get("ports") or ():
        number = port.get("port")
        if not isinstance(number, int) or isinstance(number, bool):
            continue  # a nil port: "all ports", which an IP+port member cannot express
        proto = str(port.get("protocol") or "TCP").lower()
        if proto in ("tcp", "udp", "sctp"):
            ports.append(f"{proto}:{number}")
    return _Slice(f"{namespace}/{name}" if name else "", tuple(addresses), tuple(ports))


def _members(slice_: _Slice, include_ports: bool) -> list[str]:
    if not include_ports:
        return list(slice_.addresses)
    return [f"{cidr.split('/')[0]},{port}" for cidr in slice_.addresses for port in slice_.ports]


class ServiceIndex:
    """EndpointSlices in, IP set member changes out (only for sets the RuleScanner made
    active through :meth:`update_ip_set`)."""

    def __init__(self, on_member_added: MemberCallback, on_member_removed: MemberCallback) -> None:
        self._added = on_member_added
        self._removed = on_member_removed
        self._slices: dict[tuple[str, str], _Slice] = {}
        self._slices_by_service: dict[str, set[tuple[str, str]]] = {}
        self._sets: dict[str, tuple[str, bool]] = {}  # set ID -> (service, include ports)
        self._sets_by_service: dict[str, set[str]] = {}
        self._counts: dict[str, Counter[str]] = {}  # set ID -> member -> references

    # -- from the RuleScanner ------------------------------------------------------------------

    def update_ip_set(self, set_id: str, service: str, include_ports: bool) -> None:
        if self._sets.get(set_id) == (service, include_ports):
            return
        if set_id in self._sets:
            self.delete_ip_set(set_id)
        self._sets[set_id] = (service, include_ports)
        self._sets_by_service.setdefault(service, set()).add(set_id)
        counts = self._counts[set_id] = Counter()
        for ident in sorted(self._slices_by_service.get(service, ())):
            counts.update(_members(self._slices[ident], include_ports))
        for member in sorted(counts):
            self._added(set_id, member)

    def delete_ip_set(self, set_id: str) -> None:
        """The set is going away: no member removals are sent (the set's removal covers
        them, as for selector sets)."""
        service, _ = self._sets.pop(set_id)
        ids = self._sets_by_service[service]
        ids.discard(set_id)
        if not ids:
            del self._sets_by_service[service]
        del self._counts[set_id]

    # -- from the calculation graph ------------------------------------------------------------

    def on_resource(self, key: ResourceKey, value: Any) -> None:
        if key.kind != ENDPOINT_SLICE_KIND:
            return
        ident = (key.namespace or "", key.name)
        new = parse_slice(ident[0], value) if isinstance(value, Mapping) else None
        old = self._slices.get(ident)
        if new == old:
            return
        deltas: dict[str, Counter[str]] = {}
        if old is not None:
            self._forget(ident, old, deltas)
        if new is not None and new.service:
            self._slices[ident] = new
            self._slices_by_service.setdefault(new.service, set()).add(ident)
            for set_id in self._sets_by_service.get(new.service, ()):
                deltas.setdefault(set_id, Counter()).update(_members(new, self._sets[set_id][1]))
        self._apply(deltas)

    def _forget(self, ident: tuple[str, str], old: _Slice, deltas: dict[str, Counter[str]]) -> None:
        del self._slices[ident]
        idents = self._slices_by_service[old.service]
        idents.discard(ident)
        if not idents:
            del self._slices_by_service[old.service]
        for set_id in self._sets_by_service.get(old.service, ()):
            deltas.setdefault(set_id, Counter()).subtract(_members(old, self._sets[set_id][1]))

    def _apply(self, deltas: dict[str, Counter[str]]) -> None:
        """Net changes: additions first, then removals (a member moving between slices of
        one service is neither removed nor re-added)."""
        removals: list[tuple[str, str]] = []
        for set_id in sorted(deltas):
            counts = self._counts[set_id]
            for member in sorted(deltas[set_id]):
                change = deltas[set_id][member]
                if not change:
                    continue
                before = counts[member]
                counts[member] = before + change
                if before == 0 and counts[member] > 0:
                    self._added(set_id, member)
                elif before > 0 and counts[member] <= 0:
                    del counts[member]
                    removals.append((set_id, member))
        for set_id, member in removals:
            self._removed(set_id, member)
