"""The pure parts of a rule's meaning that Felix's rule scanner, rule converter, nft renderer and
label index share with the offline evaluator: ports, protocols, the IP family a rule applies
to, how negated selectors fold into positive ones, and label inheritance from profiles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

PROTOCOL_NUMBERS = {
    "tcp": 6,
    "udp": 17,
    "icmp": 1,
    "icmpv6": 58,
    "ipv6-icmp": 58,
    "sctp": 132,
    "udplite": 136,
}
ICMP_V4, ICMP_V6 = 1, 58
NAMED_PORT_PROTOCOLS = ("tcp", "udp", "sctp")
_UDP = ("udp", 17, "17")
_SCTP = ("sctp", 132, "132")
_NUMBER_NAMES = {"6": "tcp", "17": "udp", "132": "sctp"}


class PortRange(NamedTuple):
    """An inclusive port range (a single port has ``first == last``)."""

    first: int
    last: int


def protocol_number(proto: int | str) -> int:
    """Protocol as a number: nft resolves names via /etc/protocols, which may be missing."""
    if isinstance(proto, int):
        return proto
    text = proto.strip().lower()
    if text.isdigit():
        return int(text)
    try:
        return PROTOCOL_NUMBERS[text]
    except KeyError:
        raise ValueError(f"unknown protocol {proto!r}") from None


def parse_port(port: int | str) -> tuple[int, int] | str:
    """``80`` / ``"80"`` / ``"1000:2000"`` -> (first, last); anything else is a port *name*."""
    if isinstance(port, int):
        return (port, port)
    text = str(port)
    if text.isdigit():
        return (int(text), int(text))
    first, sep, last = text.partition(":")
    if sep and first.isdigit() and last.isdigit():
        return (int(first), int(last))
    return text


def split_ports(ports: Sequence[int | str] | None) -> tuple[list[tuple[int, int]], list[str]]:
    """(numeric ranges, named ports), each in the order given."""
    numeric: list[tuple[int, int]] = []
    named: list[str] = []
    for port in ports or ():
        parsed = parse_port(port)
        if isinstance(parsed, tuple):
            numeric.append(parsed)
        else:
            named.append(parsed)
    return numeric, named


def named_port_protocol(protocol: int | str | None) -> str:
    """The protocol a rule's named ports are looked up with (TCP unless UDP or SCTP)."""
    if protocol in _UDP:
        return "udp"
    if protocol in _SCTP:
        return "sctp"
    return "tcp"


def port_protocol(protocol: str | int) -> str:
    """An endpoint port's protocol as ``tcp``/``udp``/``sctp``.

    Unspecified or unrecognised protocols count as TCP, the default for named ports (as for a
    Kubernetes containerPort).
    """
    text = str(protocol).strip().lower()
    text = _NUMBER_NAMES.get(text, text)
    return text if text in NAMED_PORT_PROTOCOLS else "tcp"


def infer_ip_version(ip_version: int | None, protocol: int | str | None) -> int | None:
    """Upstream infers the family from ICMP protocols when the rule does not name one."""
    if ip_version in (4, 6):
        return ip_version
    if protocol == "icmp":
        return 4
    if protocol == "icmpv6":
        return 6
    return None


def combine_selectors(positive: str, negated: str) -> tuple[str, str]:
    """Fold a negated selector into the positive one, ``(pos) && (!(neg))``, when both exist
    (the rule can then only match known endpoints anyway); otherwise leave them apart."""
    if positive and negated:
        return f"({positive}) && (!({negated}))", ""
    return positive, negated


def merged_labels(
    own: Mapping[str, str], parents: Sequence[Mapping[str, str] | None]
) -> dict[str, str]:
    """Effective labels: the item's own labels win; among parents the one listed first wins."""
    out: dict[str, str] = {}
    for labels in reversed(parents):
        if labels:
            out.update(labels)
    out.update(own)
    return out
