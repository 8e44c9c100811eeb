"""Set/map element normalisation: one canonical Python value per element, whatever its spelling.

Desired members arrive as ``"10.0.0.0/24"``, ``("10.0.0.1", "tcp", 80)`` or raw libnftables JSON;
the kernel lists them back in its own spelling (``/32`` dropped, protocols by name, ranges that are
exact prefixes shown as prefixes). Comparing canonical values on both sides is what lets a resync
compute element deltas instead of rewriting whole sets.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Hashable, Iterable
from typing import Any

SetType = str | tuple[str, ...]
Element = Hashable  # canonical element: str | int | tuple of those
Verdict = tuple[str, str]  # ("goto"|"jump", chain) or ("accept"|"drop"|"return"|"continue", "")

ADDR_TYPES = frozenset({"ipv4_addr", "ipv6_addr"})
INT_TYPES = frozenset({"inet_proto", "inet_service", "mark", "ether_type", "iface_index"})
CHAIN_VERDICTS = frozenset({"goto", "jump"})
SIMPLE_VERDICTS = frozenset({"accept", "drop", "return", "continue"})

# nft prints protocols by name in JSON; /etc/protocols may be absent in minimal images.
_PROTOCOLS = {
    "icmp": 1,
    "igmp": 2,
    "ipip": 4,
    "tcp": 6,
    "udp": 17,
    "gre": 47,
    "esp": 50,
    "ah": 51,
    "icmpv6": 58,
    "ipv6-icmp": 58,
    "sctp": 132,
    "udplite": 136,
}


def canonical(value: Any, typ: SetType) -> Element:
    """The canonical, hashable form of one element of a set of type ``typ``."""
    if isinstance(typ, tuple):
        parts = value["concat"] if isinstance(value, dict) else value
        if len(parts) != len(typ):
            raise ValueError(f"element {value!r} does not match concatenation {typ!r}")
        return tuple(canonical(p, t) for p, t in zip(parts, typ, strict=True))
    if typ in ADDR_TYPES:
        return _canon_addr(value)
    if typ in INT_TYPES:
        return _canon_int(value, typ)
    if isinstance(value, dict | list):
        raise ValueError(f"unsupported element {value!r} for type {typ!r}")
    return value


def canonical_all(values: Iterable[Any], typ: SetType) -> set[Element]:
    """``{canonical(v, typ) for v in values}``, the same set or the same error, without the
    per-part dispatch for Felix's own set types: an address set's members go straight to the
    address rule, and an ``address . proto . port`` set's (proto, port) pairs, which its
    members share (every remote endpoint's named port), are canonicalised once per pair
    (design/performance.md "First apply at 250,000 (session 8)")."""
    if typ in ADDR_TYPES:
        return {_canon_addr(v) for v in values}
    if isinstance(typ, tuple) and len(typ) == 3 and typ[0] in ADDR_TYPES and typ[1:] == _PORTS:
        return _canonical_addr_ports(values, typ)
    return {canonical(v, typ) for v in values}


_PORTS = ("inet_proto", "inet_service")
_PAIR_TYPES = (str, int)  # exact types whose equal values canonicalise alike (no bool, float)


def _canonical_addr_ports(values: Iterable[Any], typ: tuple[str, ...]) -> set[Element]:
    out: set[Element] = set()
    add = out.add
    pairs: dict[tuple[Any, Any], tuple[int | str, int | str]] = {}
    for v in values:
        if type(v) is not tuple or len(v) != 3:
            add(canonical(v, typ))
            continue
        addr, proto, port = v
        if type(proto) not in _PAIR_TYPES or type(port) not in _PAIR_TYPES:
            add(canonical(v, typ))
            continue
        host = _canon_addr(addr)  # first, as ``canonical`` does: a bad address is its error
        pair = pairs.get((proto, port))
        if pair is None:
            pair = pairs[proto, port] = (_canon_int(proto, typ[1]), _canon_int(port, typ[2]))
        add((host, *pair))
    return out


def to_json(elem: Element, typ: SetType) -> Any:
    """libnftables JSON for a canonical element (inverse of :func:`canonical`)."""
    if isinstance(typ, tuple):
        assert isinstance(elem, tuple)
        return {"concat": [to_json(e, t) for e, t in zip(elem, typ, strict=True)]}
    if typ in ADDR_TYPES:
        assert isinstance(elem, str)
        if "/" in elem:
            addr, length = elem.split("/")
            return {"prefix": {"addr": addr, "len": int(length)}}
        if "-" in elem:
            return {"range": elem.split("-")}
        return elem
    if typ in INT_TYPES and isinstance(elem, str):
        lo, hi = elem.split("-")
        return {"range": [int(lo), int(hi)]}
    return elem


def sort_key(elem: Element) -> str:
    """Deterministic ordering for mixed-type canonical elements (stable transactions)."""
    return repr(elem)


def canonical_verdict(value: Any) -> Verdict:
    """Canonical verdict from ``("goto", "chain")`` or libnftables JSON ``{"goto": {...}}``."""
    if isinstance(value, dict):
        ((kind, arg),) = value.items()
        target = arg.get("target", "") if isinstance(arg, dict) else ""
        return _check_verdict(kind, target)
    if isinstance(value, str):
        return _check_verdict(value, "")
    kind, target = value
    return _check_verdict(kind, target or "")


def verdict_json(verdict: Verdict) -> dict[str, Any]:
    kind, target = verdict
    if kind in CHAIN_VERDICTS:
        return {kind: {"target": target}}
    return {kind: None}


def _check_verdict(kind: str, target: str) -> Verdict:
    if kind in CHAIN_VERDICTS and target:
        return (kind, target)
    if kind in SIMPLE_VERDICTS:
        return (kind, "")
    raise ValueError(f"bad verdict {kind!r} {target!r}")


def _canon_addr(value: Any) -> str:
    if isinstance(value, dict):
        if "prefix" in value:
            p = value["prefix"]
            return _prefix(str(p["addr"]), int(p["len"]))
        if "range" in value:
            lo, hi = value["range"]
            return _addr_range(str(lo), str(hi))
        raise ValueError(f"unsupported address element {value!r}")
    text = str(value)
    if "/" in text:
        addr, length = text.split("/", 1)
        return _prefix(addr, int(length))
    if "-" in text:
        lo, hi = text.split("-")
        return _addr_range(lo.strip(), hi.strip())
    family, packed = _pton(text)
    return socket.inet_ntop(family, packed)


def _pton(text: str) -> tuple[int, bytes]:
    """Parse an address with inet_pton: ~10x cheaper than ``ipaddress`` on big IP sets."""
    family = socket.AF_INET6 if ":" in text else socket.AF_INET
    try:
        return family, socket.inet_pton(family, text)
    except OSError:
        raise ValueError(f"bad IP address {text!r}") from None


def _prefix(addr: str, length: int) -> str:
    """``addr/len`` with host bits cleared; a full-length prefix is the bare address."""
    family, packed = _pton(addr)
    bits = len(packed) * 8
    if not 0 <= length <= bits:
        raise ValueError(f"bad prefix length {length} for {addr!r}")
    if length == bits:
        return socket.inet_ntop(family, packed)
    mask = ((1 << length) - 1) << (bits - length)
    net = (int.from_bytes(packed, "big") & mask).to_bytes(len(packed), "big")
    return f"{socket.inet_ntop(family, net)}/{length}"


def _net_str(net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> str:
    if net.prefixlen == net.max_prefixlen:
        return str(net.network_address)
    return str(net)


def _addr_range(lo_text: str, hi_text: str) -> str:
    lo, hi = ipaddress.ip_address(lo_text), ipaddress.ip_address(hi_text)
    if lo == hi:
        return str(lo)
    nets = list(ipaddress.summarize_address_range(lo, hi))  # type: ignore[type-var]
    if len(nets) == 1:  # the kernel shows exact-prefix ranges as prefixes
        return _net_str(nets[0])
    return f"{lo}-{hi}"


def _canon_int(value: Any, typ: str) -> int | str:
    if isinstance(value, dict):
        if "range" in value:
            lo, hi = (_scalar_int(v, typ) for v in value["range"])
            return lo if lo == hi else f"{lo}-{hi}"
        raise ValueError(f"unsupported {typ} element {value!r}")
    if isinstance(value, str) and "-" in value and not value.startswith("-"):
        lo, hi = (_scalar_int(v.strip(), typ) for v in value.split("-"))
        return lo if lo == hi else f"{lo}-{hi}"
    return _scalar_int(value, typ)


def _scalar_int(value: Any, typ: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"bad {typ} element {value!r}")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.isdigit():
        return int(text)
    if text.lower().startswith("0x"):
        return int(text, 16)
    if typ == "inet_proto":
        if text.lower() in _PROTOCOLS:
            return _PROTOCOLS[text.lower()]
        return socket.getprotobyname(text)
    if typ == "inet_service":
        return socket.getservbyname(text)
    raise ValueError(f"bad {typ} element {value!r}")
