"""Path-segment encodings shared by every key type.

Two encodings exist in the v1 keyspace and nothing else: the name escape (``%`` -> ``%25``,
``/`` -> ``%2f``) used by the few fields that may legitimately contain a slash (workload IDs are
``<namespace>/<pod>``), and the CIDR munge (``10.0.0.0/8`` -> ``10.0.0.0-8``). Everything here is
pure and allocation-light because the syncer and Typha call it for every update.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

IPNetwork = IPv4Network | IPv6Network
IPAddress = IPv4Address | IPv6Address


class InvalidKeyError(ValueError):
    """A key whose fields cannot be written as an unambiguous default path."""


def escape_name(name: str) -> str:
    """Make ``name`` safe as one path segment; ``unescape_name`` is its exact inverse."""
    return name.replace("%", "%25").replace("/", "%2f")


def unescape_name(segment: str) -> str:
    """Reverse ``escape_name``. Only the two escapes it produces are decoded (lower-case ``2f``)."""
    if "%" not in segment:
        return segment
    # Decoding %2f first is safe: in escaped text every '%' starts either "%25" or "%2f".
    return segment.replace("%2f", "/").replace("%25", "%")


def to_network(value: str | IPNetwork) -> IPNetwork:
    """Coerce a CIDR (string or network) to a network object, masking host bits."""
    if isinstance(value, IPv4Network | IPv6Network):
        return value
    return ip_network(value, strict=False)


def to_address(value: str | IPAddress) -> IPAddress:
    """Coerce an IP (string or address object) to an address object."""
    addr = value if isinstance(value, IPv4Address | IPv6Address) else ip_address(value)
    if isinstance(addr, IPv6Address) and addr.scope_id:
        raise InvalidKeyError(f"address {addr} has a scope ID, which keys cannot carry")
    return addr


def cidr_segment(cidr: IPNetwork) -> str:
    """The path form of a CIDR: ``fd00::/64`` -> ``fd00::-64``."""
    return f"{cidr.network_address}-{cidr.prefixlen}"


def parse_cidr_segment(segment: str, version: int) -> IPNetwork | None:
    """Parse ``<addr>-<len>`` of IP ``version``, masked to the network; None if malformed.

    Stricter than ``ip_network``: the length must be ASCII digits (no netmask form) and the
    address family must match the one the path names.
    """
    addr, sep, length = segment.partition("-")
    if not sep or not length.isascii() or not length.isdigit() or "%" in addr:
        return None
    try:
        net = ip_network(f"{addr}/{length}", strict=False)
    except ValueError:
        return None
    return net if net.version == version else None


def parse_address(text: str, version: int) -> IPAddress | None:
    """Parse an IP address of IP ``version``; None if malformed or of the other family."""
    if "%" in text:  # no IPv6 scope IDs in keys
        return None
    try:
        addr = ip_address(text)
    except ValueError:
        return None
    return addr if addr.version == version else None
