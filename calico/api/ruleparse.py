"""The scalar parses of a policy rule (protocol, port) without pydantic.

``calico.api.rules`` wraps them as its field validators; the lean readers of stored JSON
(``calico.model.processors.lean``, ``leanpolicy``) call the same functions, so a value both
accept has one canonical form and a refusal has one message.
"""

from __future__ import annotations

import re

from calico.api import validators as v

PROTOCOL_NUMBERS: dict[str, int] = {
    "TCP": 6,
    "UDP": 17,
    "ICMP": 1,
    "ICMPv6": 58,
    "SCTP": 132,
    "UDPLite": 136,
}
PORT_PROTOCOLS = frozenset({6, 17, 132})  # TCP, UDP, SCTP


def parse_protocol(value: object) -> int | str:
    """Upstream's numorstring.Protocol: a name (case-sensitive) or a number 1-255.
    A numeric string ("6") becomes the number, as upstream's unmarshalling does.
    """
    rule = "must be one of TCP, UDP, ICMP, ICMPv6, SCTP, UDPLite (case-sensitive) or 1-255"
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"protocol {value!r} is invalid: {rule}")
    if isinstance(value, str) and value.isdigit() and value.isascii():
        value = int(value)
    if isinstance(value, int):
        if not 1 <= value <= 255:
            raise ValueError(f"protocol number {value} is invalid: {rule}")
        return value
    if value not in PROTOCOL_NUMBERS:
        raise ValueError(f"protocol {value!r} is invalid: {rule}")
    return value


def protocol_number(protocol: int | str | None) -> int | None:
    """The IP protocol number of a validated protocol value (None if unset)."""
    if protocol is None or isinstance(protocol, int):
        return protocol
    return PROTOCOL_NUMBERS[protocol]


def supports_ports(protocol: int | str | None) -> bool:
    return protocol_number(protocol) in PORT_PROTOCOLS


def parse_port(value: object) -> int | str:
    """Upstream's numorstring.Port: 80, "80", "1000:2000" or a named port ("http").
    Canonical form: a single port is an int (also "80:80"), a range "min:max", a name as is.
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"port {value!r} is invalid: expected a number, 'min:max' or a name")
    if isinstance(value, int) or (value.isascii() and value.isdigit()):
        num = int(value)
        if not 1 <= num <= 65535:
            raise ValueError(f"port {value!r} is invalid: port numbers must be 1-65535")
        return num
    if m := re.fullmatch(r"(\d+):(\d+)", value):
        low, high = int(m.group(1)), int(m.group(2))
        if not (1 <= low <= 65535 and 1 <= high <= 65535):
            raise ValueError(f"port range {value!r} is invalid: port numbers must be 1-65535")
        if low > high:
            raise ValueError(f"port range {value!r} is invalid: minimum is greater than maximum")
        return low if low == high else f"{low}:{high}"
    v.port_name(value)
    return value
