"""Primitive validators shared by every resource module.

Each returns the (possibly normalised) value or raises ``ValueError`` with a message that
states the rule broken; pydantic wraps that with the field path.
"""

from __future__ import annotations

import _socket  # socket's C core: inet_pton without socket.py's imports (~3 ms)
import ipaddress
import math
import re
from functools import lru_cache

from calico.durations import DurationError, format_duration, parse_duration

#: JSON-schema marker of fields that take an int or a string; here, not in a resource module, so
#: a module using it does not import (and build the models of) another resource module.
INT_OR_STRING: dict[str, bool] = {"x-kubernetes-int-or-string": True}

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def dns1123_label(value: str, what: str = "name") -> str:
    if not value or len(value) > 63 or not DNS1123_LABEL.match(value):
        raise ValueError(
            f"{what} {value!r} must be a DNS-1123 label: at most 63 lower-case alphanumeric "
            "characters or '-', starting and ending with an alphanumeric character"
        )
    return value


def dns1123_subdomain(value: str, what: str = "name") -> str:
    if not value or len(value) > 253 or not DNS1123_SUBDOMAIN.match(value):
        raise ValueError(
            f"{what} {value!r} must be a DNS-1123 subdomain: at most 253 lower-case "
            "alphanumeric characters, '-' or '.', starting and ending with an alphanumeric "
            "character"
        )
    return value


def label_key(key: str) -> str:
    """A Kubernetes label key: optional DNS subdomain prefix + '/' + name of at most 63 chars.

    Memoised (``_label_key_problem``): every endpoint and policy carries the same few keys
    and values, and checking them was a tenth of decoding a WorkloadEndpoint (design/
    performance.md "Full-Felix scale")."""
    problem = _label_key_problem(key)
    if problem is not None:
        raise ValueError(problem)
    return key


def label_value(value: str) -> str:
    problem = _label_value_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


@lru_cache(maxsize=16384)
def _label_key_problem(key: str) -> str | None:
    try:
        label_key_uncached(key)
    except ValueError as exc:
        return str(exc)
    return None


@lru_cache(maxsize=16384)
def _label_value_problem(value: str) -> str | None:
    try:
        label_value_uncached(value)
    except ValueError as exc:
        return str(exc)
    return None


def label_key_uncached(key: str) -> str:
    """The reference check behind :func:`label_key`."""
    prefix, _, name = key.rpartition("/")
    if prefix:
        dns1123_subdomain(prefix, "label key prefix")
    if not name or len(name) > 63 or not LABEL_NAME.match(name):
        raise ValueError(f"label key {key!r} is not a valid Kubernetes label name")
    return key


def label_value_uncached(value: str) -> str:
    """The reference check behind :func:`label_value`."""
    if len(value) > 63 or not LABEL_VALUE.match(value):
        raise ValueError(f"label value {value!r} is not a valid Kubernetes label value")
    return value


def label_map(value: dict[str, str]) -> dict[str, str]:
    """Every key and value a valid Kubernetes label (labelsToApply, matchLabels)."""
    for key, val in value.items():
        label_key(key)
        label_value(val)
    return value


def ip_address(value: str, version: int | None = None) -> str:
    try:
        addr = ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a valid IP address") from None
    if version is not None and addr.version != version:
        raise ValueError(f"{value!r} is not an IPv{version} address")
    return value


def is_ipv4_host_cidr(value: str) -> bool:
    """True for ``a.b.c.d/32`` in the exact form ``ipaddress`` accepts, checked with
    ``inet_pton`` (one C call, no objects); False means "not known": use ``ipaddress``. Every
    endpoint's ipNetworks pass here at each Felix start (design/performance.md "Full-Felix
    scale"); tests/unit/api/test_host_cidr.py checks it never accepts what ``ipaddress``
    rejects."""
    addr, slash, plen = value.partition("/")
    if plen != "32" or not slash or not 7 <= len(addr) <= 15 or not addr.isascii():
        return False
    try:
        _socket.inet_pton(_socket.AF_INET, addr)
    except OSError:
        return False
    return True


def cidr(value: str, version: int | None = None, strict: bool = False) -> str:
    """An IP network in CIDR notation. A bare address is accepted as a /32 or /128, like upstream.

    With ``strict`` the host bits must be zero (IP pools); otherwise they are allowed (rule nets).
    """
    try:
        net = ipaddress.ip_network(value, strict=strict)
    except ValueError as exc:
        if strict and "host bits set" in str(exc):
            raise ValueError(f"{value!r} has host bits set; expected a network address") from None
        raise ValueError(f"{value!r} is not a valid CIDR") from None
    if version is not None and net.version != version:
        raise ValueError(f"{value!r} is not an IPv{version} CIDR")
    return value


def finite_order(value: float | None) -> float | None:
    """A tier's or policy's ``order``: any float except NaN and the infinities, which would
    make the dataplane's ordering undefined."""
    if value is not None and not math.isfinite(value):
        raise ValueError("order must be a finite number")
    return value


def port_number(value: int) -> int:
    if not 0 <= value <= 65535:
        raise ValueError(f"port {value} is out of range 0-65535")
    return value


def asn(value: int | str) -> int:
    """A BGP AS number, either a plain integer or the dotted ``high.low`` form; returns the int."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a valid AS number")
    if isinstance(value, int):
        n = value
    else:
        text = str(value).strip()
        if re.fullmatch(r"\d+", text):
            n = int(text)
        elif m := re.fullmatch(r"(\d+)\.(\d+)", text):
            high, low = int(m.group(1)), int(m.group(2))
            if high > 0xFFFF or low > 0xFFFF:
                raise ValueError(f"{value!r} is not a valid AS number: each half must be <= 65535")
            n = (high << 16) | low
        else:
            raise ValueError(f"{value!r} is not a valid AS number")
    if not 0 <= n <= 0xFFFFFFFF:
        raise ValueError(f"AS number {value!r} is out of range 0-4294967295")
    return n


def duration(value: str) -> str:
    """A Go duration string, in the canonical form upstream's ``metav1.Duration`` prints
    (``125s`` -> ``2m5s``)."""
    try:
        seconds = parse_duration(value)
    except DurationError as exc:
        raise ValueError(str(exc)) from None
    return format_duration(seconds)


# --- Added for the ipam/bgp/felixconfig/cluster models (additive; keep names stable). ---


MAC_ADDRESS = re.compile(r"[0-9A-Fa-f]{2}([:-][0-9A-Fa-f]{2}){5}")


def mac_address(value: str) -> str:
    """A colon- or dash-separated 48-bit MAC address, as Node tunnel MACs are written."""
    if not MAC_ADDRESS.fullmatch(value):
        raise ValueError(f"{value!r} is not a valid MAC address")
    return value


def split_ip_port(value: str) -> tuple[str, int | None]:
    """Split ``ip``, ``ipv4:port`` or ``[ipv6]:port`` (BGPPeer peerIP); raises ValueError."""
    rule = "must be an IP address, optionally with a port as <IPv4>:<port> or [<IPv6>]:<port>"
    host, port_text = value, None
    if value.startswith("["):
        m = re.fullmatch(r"\[([^\]]+)\]:(\d{1,5})", value)
        if not m:
            raise ValueError(f"{value!r} {rule}")
        host, port_text = m.group(1), m.group(2)
        if ":" not in host:
            raise ValueError(f"{value!r} {rule}")
    elif value.count(":") == 1:
        host, port_text = value.split(":")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"{value!r} {rule}") from None
    if port_text is None:
        return host, None
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"{value!r} {rule}; the port must be 1-65535")
    return host, int(port_text)


def selector_expression(text: str) -> str:
    """A Calico selector; delegates to the selector package (imported lazily)."""
    check = globals().get("validate_selector")
    if check is not None and check is not selector_expression:
        check(text)
        return text
    try:
        from calico.selector import validate
    except ImportError:  # selector package not built yet: syntax is checked where it is used
        return text
    validate(text)
    return text


def raise_at(loc: tuple[str | int, ...], message: str, value: object = None) -> None:
    """Raise a pydantic error at ``loc`` (relative to the model being validated).

    Lets a cross-field check inside a ``model_validator`` report the exact field path
    (``spec.blockSize``) instead of the enclosing object; the message is kept verbatim.
    """
    from pydantic import ValidationError
    from pydantic_core import InitErrorDetails, PydanticCustomError

    detail = InitErrorDetails(
        type=PydanticCustomError("value_error", message), loc=loc, input=value
    )
    raise ValidationError.from_exception_data("validation", [detail])


# --- Added for the policy/endpoint models and the loader (additive; keep names stable). ---

IANA_SVC_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$")
# Compiled once: ``re.search(text, ...)`` looks the pattern up in re's cache on every call,
# and a named port is checked on every endpoint at a Felix start (design/performance.md).
HAS_LETTER = re.compile(r"[a-z]")
INTERFACE_NAME = re.compile(r"^[a-zA-Z0-9_.-]{1,15}$")
CONTAINER_ID = re.compile(r"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$")


def validate_selector(text: str) -> str:
    """A Calico selector expression; the grammar lives in ``calico.selector`` (imported lazily).

    Until that package exists the text is accepted unchecked, so models stay usable.
    """
    try:
        from calico.selector import SelectorParseError, validate
    except ModuleNotFoundError as exc:
        if exc.name in ("calico.selector", "calico"):
            return text
        raise
    try:
        validate(text)
    except SelectorParseError as exc:
        message = str(exc)
        if text not in message:
            message = f"invalid selector {text!r}: {message}"
        raise ValueError(message) from None
    return text


def port_name(value: str) -> str:
    """A Kubernetes named port (IANA service name): <= 15 chars, a-z0-9 and '-', has a letter."""
    if not IANA_SVC_NAME.match(value) or "--" in value or not HAS_LETTER.search(value):
        raise ValueError(
            f"{value!r} is not a valid port name: at most 15 lower-case alphanumeric characters "
            "or '-', containing at least one letter, no '--', not starting or ending with '-'"
        )
    return value


def interface_name(value: str, allow_wildcard: bool = False) -> str:
    """A Linux interface name (1-15 of [a-zA-Z0-9_.-]); ``*`` too when ``allow_wildcard``."""
    if allow_wildcard and value == "*":
        return value
    if not INTERFACE_NAME.match(value):
        raise ValueError(
            f"interface name {value!r} is invalid: 1-15 characters from "
            "a-z, A-Z, 0-9, '_', '.', '-'"
            + (" (or '*' for all interfaces)" if allow_wildcard else "")
        )
    return value


def container_id(value: str) -> str:
    if not CONTAINER_ID.match(value):
        raise ValueError(
            f"container ID {value!r} is invalid: alphanumeric characters or '-', "
            "starting and ending with an alphanumeric character"
        )
    return value


def annotation_key(key: str) -> str:
    """Annotation keys follow the label-key (qualified name) rules, compared in lower case."""
    try:
        label_key(key.lower())
    except ValueError:
        raise ValueError(f"annotation key {key!r} is not a valid qualified name") from None
    return key


def raise_issues(issues: list[tuple[tuple[str | int, ...], str]]) -> None:
    """Like ``raise_at`` but for several (loc, message) pairs at once; no-op when empty.

    Locs are relative to the model being validated and use wire (camelCase) names.
    """
    if not issues:
        return
    from pydantic import ValidationError
    from pydantic_core import InitErrorDetails, PydanticCustomError

    details = [
        InitErrorDetails(type=PydanticCustomError("value_error", msg), loc=loc, input=None)
        for loc, msg in issues
    ]
    raise ValidationError.from_exception_data("validation", details)


def node_name(value: str) -> str:
    """A Calico node name (a BGPPeer's ``node``): a DNS-1123 subdomain, as upstream checks."""
    if value:
        dns1123_subdomain(value, "node name")
    return value
