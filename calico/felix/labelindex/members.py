"""IP set member strings and named-port matching, in the dataplane wire format
(design/felix-labelindex.md, "Invariants": members and named-port protocol).

Members are plain strings so they hash cheaply and cross to the dataplane unchanged:
``10.0.0.0/24``, ``10.0.0.1/32``, ``fd00::1/128`` for NET sets and ``10.0.0.1,tcp:8080`` for
IP_AND_PORT (named-port) sets.
"""

from __future__ import annotations

import ipaddress
import socket
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


def _pton(text: str) -> tuple[int, bytes] | None:
    """``(family, packed)`` via inet_pton (~10x cheaper than ``ipaddress``; at 250k endpoints
    ``ipaddress`` was a third of the calc graph's time), or None for anything it rejects,
    which then takes the ``ipaddress`` path and its exact acceptance rules and errors."""
    family = socket.AF_INET6 if ":" in text else socket.AF_INET
    try:
        packed = socket.inet_pton(family, text)
    except OSError:
        return None
    if family == socket.AF_INET6 and not any(packed[:10]):
        return None  # inet_ntop writes ::ffff:a.b.c.d where ipaddress writes ::ffff:xxxx:xxxx
    return family, packed


def normalise_net(net: str) -> tuple[str, ...]:
    """The NET members one CIDR or bare IP contributes.

    Host bits are masked, a bare IP becomes ``/32`` or ``/128``, and a ``/0`` becomes its two
    ``/1`` halves (the kernel cannot hold a zero-length prefix). Raises ``ValueError`` on junk.
    """
    text = net.strip()
    addr, slash, length_text = text.partition("/")
    parsed = _pton(addr)
    if parsed is not None and (not slash or (length_text.isascii() and length_text.isdigit())):
        family, packed = parsed
        bits = len(packed) * 8
        length = int(length_text) if slash else bits
        if 0 < length <= bits:
            if length < bits:
                mask = ((1 << length) - 1) << (bits - length)
                packed = (int.from_bytes(packed, "big") & mask).to_bytes(len(packed), "big")
            return (f"{socket.inet_ntop(family, packed)}/{length}",)
    return _normalise_net_slow(text)


def check_net(net: str) -> None:
    """Raise ``ValueError`` exactly when :func:`normalise_net` would, building no member text:
    the validation filter checks every endpoint's nets and drops the result."""
    text = net.strip()
    addr, slash, length_text = text.partition("/")
    parsed = _pton(addr)
    if parsed is not None and (not slash or (length_text.isascii() and length_text.isdigit())):
        bits = len(parsed[1]) * 8
        if 0 < (int(length_text) if slash else bits) <= bits:
            return
    _normalise_net_slow(text)


@lru_cache(maxsize=4096)
def _normalise_net_slow(net: str) -> tuple[str, ...]:
    network = ipaddress.ip_network(net, strict=False)
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
    if addrs is _verified[0]:  # every text is its own host member: the answer is the tuple
        return addrs  # type: ignore[return-value]  # (only tuples are remembered)
    return tuple(_host_cidr(a) for a in addrs)


# The last tuple :func:`all_host_members` answered True for. Holding the reference keeps the
# identity test sound (the tuple cannot be freed and its id reused), and a tuple cannot
# change, so whatever thread reads it, it is a tuple of host members. The calc graph checks
# an endpoint's nets in the validation filter, then asks host_cidrs for the same tuple: at
# 250,000 endpoints the second parse was ~0.25-0.4 s (design/performance.md "In-sync at
# 250,000: a safe margin (session 9)").
_verified: list[tuple[str, ...] | None] = [None]


def all_host_members(nets: object) -> bool:
    """True if ``nets`` is a tuple of texts that are each their own host member
    (:func:`is_host_member`); remembers it, so :func:`host_cidrs` of the same tuple returns it
    without parsing it again. False says nothing: check each text the general way."""
    if type(nets) is not tuple:
        return False
    if nets is _verified[0]:
        return True
    for net in nets:
        if type(net) is not str or not is_host_member(net):
            return False
    _verified[0] = nets
    return True


def is_host_member(text: str) -> bool:
    """True if ``text`` is an address written as its own host member (``10.0.0.5/32``,
    ``fd00::1/128``: canonical, and for IPv6 not IPv4-mapped): what the datastore holds for
    workload endpoints. Such a text is a valid net, normalises to itself and is its own
    :func:`host_cidrs` member, so callers can skip parsing it."""
    if text.endswith("/32"):
        return _canonical_host(text[:-3], True)
    if text.endswith("/128"):
        return _canonical_host(text[:-4], False)
    return False


def _host_cidr(addr: str) -> str:
    # Already a host member: the text itself, which is what the general path would write.
    return addr if is_host_member(addr) else _host_cidr_general(addr)


def _host_cidr_general(addr: str) -> str:
    """:func:`_host_cidr` for any text (the reference its fast path is tested against)."""
    text = addr.strip().split("/", 1)[0]
    parsed = _pton(text)
    if parsed is not None:
        family, packed = parsed
        return f"{socket.inet_ntop(family, packed)}/{len(packed) * 8}"
    ip = ipaddress.ip_address(text)
    return f"{ip}/{ip.max_prefixlen}"


def _canonical_host(text: str, v4: bool) -> bool:
    """True if ``text`` is the IPv4 (``v4``) or IPv6 address exactly as :func:`_host_cidr`'s
    general path would print it: ``inet_ntop`` gives it back unchanged (and, for IPv6, it is
    not IPv4-mapped, which that path leaves to ``ipaddress``)."""
    family = socket.AF_INET if v4 else socket.AF_INET6
    if v4 == (":" in text):
        return False
    try:
        packed = socket.inet_pton(family, text)
    except (OSError, ValueError):  # ValueError: an embedded NUL; the general path decides
        return False
    return (v4 or any(packed[:10])) and socket.inet_ntop(family, packed) == text


def _address_of(member: str) -> str:
    """The address of a normalised member (host bits already clear): the text before ``/``."""
    return member.partition("/")[0]


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
