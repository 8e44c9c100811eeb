"""Network-shaped value parsers: addresses, CIDR lists, failsafe port lists, port ranges,
route table ranges, etcd endpoint lists and interface name/regex lists.

Values are immutable (tuples, frozen dataclasses) so resolved configs compare with ``==``.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from calico.felix.config.parsers import ParseError, Parser


@dataclass(frozen=True)
class IPParser(Parser):
    """One IP address of the given version; the zero value None means "not set"."""

    kind: str = "ipv4"
    zero: Any = None
    version: int = 4

    def parse(self, raw: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        try:
            addr = ipaddress.ip_address(raw)
        except ValueError:
            raise ParseError("invalid IP") from None
        if addr.version != self.version:
            raise ParseError(f"not an IPv{self.version} address")
        return addr

    def format(self, value: Any) -> str:
        return "" if value is None else str(value)


def _split(raw: str) -> list[str]:
    return [item.strip(" ") for item in raw.split(",") if item.strip(" ")]


def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """A CIDR or a bare IP (as a /32 or /128); host bits are masked off as upstream does."""
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise ParseError(f"invalid CIDR or IP {text}") from None


@dataclass(frozen=True)
class CIDRListParser(Parser):
    """Comma-separated IPv4 CIDRs or IPs, normalised (``10.0.0.1`` -> ``10.0.0.1/32``)."""

    kind: str = "cidr-list"
    zero: Any = ()

    def parse(self, raw: str) -> tuple[str, ...]:
        out = []
        for item in _split(raw):
            net = _network(item)
            if net.version != 4:
                raise ParseError("invalid CIDR or IP (not v4)")
            out.append(str(net))
        return tuple(out)

    def format(self, value: Any) -> str:
        return ",".join(value)


@dataclass(frozen=True)
class EndpointListParser(Parser):
    """etcd endpoints: ``scheme://host:port`` URLs with one shared scheme and nothing else."""

    kind: str = "endpoint-list"
    zero: Any = ()

    def parse(self, raw: str) -> tuple[str, ...]:
        out: list[str] = []
        scheme = None
        for item in _split(raw):
            try:
                url = urlsplit(item)
                url.port  # noqa: B018 - validates the port number
            except ValueError:
                raise ParseError(f"{item} is not a valid URL") from None
            if scheme is not None and url.scheme != scheme:
                raise ParseError("all endpoints must have the same scheme")
            scheme = url.scheme
            extra = url.path not in ("", "/") or url.query or url.fragment or url.username
            if extra or not url.netloc:
                raise ParseError(
                    "endpoint contained unsupported URL part; expected http(s)://hostname:port only"
                )
            out.append(f"{url.scheme}://{url.netloc}/")
        return tuple(out)

    def format(self, value: Any) -> str:
        return ",".join(value)


@dataclass(frozen=True)
class ProtoPort:
    """One failsafe entry: protocol, port and optionally the CIDR the peer must be in."""

    protocol: str
    port: int
    net: str = ""

    def __str__(self) -> str:
        if not self.net:
            return f"{self.protocol}:{self.port}"
        if ":" in self.net:
            return f"{self.protocol}:[{self.net}]:{self.port}"
        return f"{self.protocol}:{self.net}:{self.port}"


_V6_NET = re.compile(r"(?P<pre>[^\[]*)\[(?P<net>[^\]]*)\]:(?P<port>.*)")
_PORT_FORMS = "ports should be <protocol>:<net>:<number> or <protocol>:<number> or <number>"


def _proto_port(entry: str) -> ProtoPort:
    net = ""
    if m := _V6_NET.fullmatch(entry):
        net = m["net"]
        entry = m["pre"] + m["port"]
    protocol, port = "tcp", entry
    parts = entry.split(":")
    if len(parts) > 3:
        raise ParseError(_PORT_FORMS)
    if len(parts) == 3:
        protocol, net, port = parts[0].lower(), parts[1], parts[2]
    elif len(parts) == 2:
        protocol, port = parts[0].lower(), parts[1]
    if protocol not in ("tcp", "udp"):
        raise ParseError(f"unknown protocol: {protocol}")
    if not re.fullmatch(r"[+-]?\d+", port):
        raise ParseError("ports should be integers")
    number = int(port)
    if not 0 <= number <= 65535:
        raise ParseError("ports must be in range 0-65535")
    return ProtoPort(protocol, number, str(_network(net)) if net else "")


@dataclass(frozen=True)
class PortListParser(Parser):
    """Failsafe ports: ``tcp:22,udp:68,tcp:10.0.0.0/8:179,tcp:[fd00::/8]:22,53``."""

    kind: str = "port-list"
    zero: Any = ()

    def parse(self, raw: str) -> tuple[ProtoPort, ...]:
        return tuple(_proto_port(item) for item in _split(raw))

    def format(self, value: Any) -> str:
        return ",".join(str(pp) for pp in value) or "none"


class PortRange(NamedTuple):
    """An inclusive port range; a single port has lo == hi. (0, 0) means "not set"."""

    lo: int
    hi: int

    def __str__(self) -> str:
        return str(self.lo) if self.lo == self.hi else f"{self.lo}:{self.hi}"


NO_PORT_RANGE = PortRange(0, 0)


def _port_range(text: str) -> PortRange:
    m = re.fullmatch(r"(\d+)(?::(\d+))?", text.strip())
    if not m:
        raise ParseError(f"{text} is not a valid port range")
    lo = int(m[1])
    hi = int(m[2]) if m[2] else lo
    if hi > 65535 or lo > hi:
        raise ParseError(f"{text} is not a valid port range")
    return PortRange(lo, hi)


@dataclass(frozen=True)
class PortRangeParser(Parser):
    """``8080`` or ``30000:32767`` (named ports are not allowed)."""

    kind: str = "portrange"
    zero: Any = NO_PORT_RANGE

    def parse(self, raw: str) -> PortRange:
        return _port_range(raw)


@dataclass(frozen=True)
class PortRangeListParser(Parser):
    kind: str = "portrange-list"
    zero: Any = ()

    def parse(self, raw: str) -> tuple[PortRange, ...]:
        return tuple(_port_range(item) for item in raw.split(","))

    def format(self, value: Any) -> str:
        return ",".join(str(r) for r in value)


class IndexRange(NamedTuple):
    """An inclusive range of kernel routing table indices."""

    lo: int
    hi: int

    def __str__(self) -> str:
        return f"{self.lo}-{self.hi}"


NO_INDEX_RANGE = IndexRange(0, 0)


@dataclass(frozen=True)
class RouteTableRangeParser(Parser):
    """The legacy single ``min-max`` range, within 1-250."""

    kind: str = "route-table-range"
    zero: Any = NO_INDEX_RANGE

    def parse(self, raw: str) -> IndexRange:
        m = re.fullmatch(r"(\d+)-(\d+)", raw)
        if not m or not 1 <= int(m[1]) <= int(m[2]) <= 250:
            raise ParseError("must be a range of route table indices within 1-250")
        return IndexRange(int(m[1]), int(m[2]))


_MAX_TABLE = 0xFFFFFFFF
_MAX_TABLES_TARGETED = 0xFFFF


@dataclass(frozen=True)
class RouteTableRangesParser(Parser):
    """``n-m`` ranges (comma or space separated); at most 65535 tables in total."""

    kind: str = "route-table-ranges"
    zero: Any = ()

    def parse(self, raw: str) -> tuple[IndexRange, ...]:
        found = re.findall(r"(\d+)-(\d+)", raw)
        if not found:
            raise ParseError("must be a list of route-table ranges")
        total = 0
        out = []
        for lo_text, hi_text in found:
            lo, hi = int(lo_text), int(hi_text)
            if lo <= 0:
                raise ParseError("min value is not a valid number")
            if lo > hi:
                raise ParseError("min value is greater than max value")
            if hi > _MAX_TABLE:
                raise ParseError("max value is too high")
            total += hi - lo
            if total > _MAX_TABLES_TARGETED:
                raise ParseError("targets too many tables")
            out.append(IndexRange(lo, hi))
        return tuple(out)

    def format(self, value: Any) -> str:
        return ",".join(str(r) for r in value)


_IFACE_NAME = re.compile(r"[a-zA-Z0-9_-]{1,15}")
_IFACE_REGEX = re.compile(r"/\S+/")


@dataclass(frozen=True)
class IfaceRegexListParser(Parser):
    """InterfaceExclude: names (exact match) or ``/regex/`` entries, comma-separated."""

    kind: str = "iface-list-regexp"
    zero: Any = ()
    message: str = field(default="list contains invalid Linux interface name or regex pattern")

    def parse(self, raw: str) -> tuple[re.Pattern[str], ...]:
        out = []
        for item in raw.split(","):
            if _IFACE_REGEX.fullmatch(item):
                try:
                    out.append(re.compile(item[1:-1]))
                except re.error:
                    raise ParseError(self.message) from None
            elif _IFACE_NAME.fullmatch(item):
                out.append(re.compile("^" + re.escape(item) + "$"))
            else:
                raise ParseError(self.message)
        return tuple(out)

    def format(self, value: Any) -> str:
        items = []
        for pattern in value:
            text = pattern.pattern
            name = re.sub(r"\\(.)", r"\1", text[1:-1])
            exact = text == "^" + re.escape(name) + "$"
            items.append(name if exact and _IFACE_NAME.fullmatch(name) else f"/{text}/")
        return ",".join(items)
