"""IP set member strings and named-port matching, in the dataplane wire format
(design/felix-labelindex.md, "Invariants": members and named-port protocol).

Members are plain strings so they hash cheaply and cross to the dataplane unchanged:
``10.0.0.0/24``, ``10.0.0.1/32``, ``fd00::1/128`` for NET sets and ``10.0.0.1,tcp:8080`` for
IP_AND_PORT (named-port) sets.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from calico.policyeval.rulesem import NAMED_PORT_PROTOCOLS, port_protocol

PROTOCOLS = NAMED_PORT_PROTOCOLS
ANY = "any"
_PROTOCOL_NUMBERS = {"6": "tcp", "17": "udp", "132": "sctp"}

_V4_HALVES = ("0.0.0.0/1", "128.0.0.0/1")
_V6_HALVES = ("::/1", "8000::/1")


@dataclass(frozen=True, slots=True)
class NamedPort:
    """A named port declared by an endpoint (``protocol`` as in the datastore: any case, a
    protocol number, or empty for "unspecified")."""

    name: str
    protocol: str
    port: int


def set_protocol(protocol: str | None) -> str | None:
    """Normalise a named-port IP set's protocol: ``None`` (plain selector set), ``any``, or one of
    :data:`PROTOCOLS`. Raises ``ValueError`` for anything else."""
    if protocol is None:
        return None
    text = protocol.strip().lower()
    text = _PROTOCOL_NUMBERS.get(text, text)
    if text == ANY or text in PROTOCOLS:
        return text
    raise ValueError(f"unsupported named-port protocol {protocol!r}")


@lru_cache(maxsize=65536)
def normalise_net(net: str) -> tuple[str, ...]:
    """The NET members one CIDR or bare IP contributes.

    Host bits are masked, a bare IP becomes ``/32`` or ``/128``, and a ``/0`` becomes its two
    ``/1`` halves (the kernel cannot hold a zero-length prefix). Raises ``ValueError`` on junk.
    """
    network = ipaddress.ip_network(net.strip(), strict=False)
    if network.prefixlen == 0:
        return _V4_HALVES if network.version == 4 else _V6_HALVES
    return (network.with_prefixlen,)


def normalise_nets(nets: Iterable[str]) -> tuple[str, ...]:
    """Concatenated :func:`normalise_net` of every entry, duplicates kept (they are ref-counted)."""
    out: list[str] = []
    for net in nets:
        out.extend(normalise_net(net))
    return tuple(out)


def host_cidrs(addrs: Iterable[str]) -> tuple[str, ...]:
    """Single-address CIDRs for a workload's or host's IPs: any prefix length is ignored, so
    ``10.0.0.5/24`` contributes ``10.0.0.5/32`` (upstream ignores WEP net prefixes)."""
    return tuple(_host_cidr(a) for a in addrs)


@lru_cache(maxsize=65536)
def _host_cidr(addr: str) -> str:
    ip = ipaddress.ip_address(addr.strip().split("/", 1)[0])
    return f"{ip}/{ip.max_prefixlen}"


@lru_cache(maxsize=65536)
def _address_of(member: str) -> str:
    return str(ipaddress.ip_network(member).network_address)


def port_members(
    nets: Sequence[str], ports: Sequence[NamedPort], name: str, protocol: str
) -> list[str]:
    """IP_AND_PORT members for one named-port set: matching ports x the endpoint's addresses.

    A port matches when its name equals ``name`` and its protocol is ``protocol`` (or the set's
    protocol is ``any``); the member carries the port's own protocol. ``nets`` must already be
    normalised; a network's address stands in for it (named ports come from endpoints, whose
    nets are single addresses anyway).
    """
    out: list[str] = []
    for p in ports:
        if p.name != name:
            continue
        proto = port_protocol(p.protocol)
        if protocol != ANY and proto != protocol:
            continue
        for net in nets:
            out.append(f"{_address_of(net)},{proto}:{p.port}")
    return out
