"""Helpers every update processor shares: decoding a stored v3 KV, and v1 value formatting.

Processors are called with the datastore path and the decoded JSON as stored. They re-validate
through the v3 models (so defaults such as a policy's ``types`` and ``tier`` are applied even
to values written by hand) and report any failure as ``ValueError``: the syncer logs it and
emits nothing for that source key.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any, TypeVar

from calico.api import APIError, Resource, parse_resource
from calico.model.paths import key_from_default_path
from calico.model.resources import ResourceKey

R = TypeVar("R", bound=Resource)
Output = dict[str, Any]

NAMESPACE_LABEL = "projectcalico.org/namespace"
ORCHESTRATOR_LABEL = "projectcalico.org/orchestrator"
SERVICE_ACCOUNT_LABEL = "projectcalico.org/serviceaccount"
NAMESPACE_LABEL_PREFIX = "pcns."
SERVICE_ACCOUNT_LABEL_PREFIX = "pcsa."
NAMESPACE_PROFILE_PREFIX = "kns."


def resource_key(path: str) -> ResourceKey:
    """The v3 ResourceKey a datastore path names (ValueError for anything else)."""
    key = key_from_default_path(path)
    if not isinstance(key, ResourceKey):
        raise ValueError(f"{path!r} is not a v3 resource path")
    return key


def decode(path: str, value: Any, cls: type[R]) -> tuple[ResourceKey, R]:
    """Validate a stored value as ``cls``; the path (not the value) names the resource."""
    key = resource_key(path)
    if key.kind != cls.KIND:
        raise ValueError(f"{path!r} holds a {key.kind}, expected {cls.KIND}")
    if not isinstance(value, Mapping):
        raise ValueError(f"{path!r}: value is not a JSON object")
    data = dict(value)
    meta = dict(data.get("metadata") or {})
    meta.setdefault("name", key.name)
    if key.namespace:
        meta.setdefault("namespace", key.namespace)
    data["metadata"] = meta
    data.setdefault("apiVersion", "projectcalico.org/v3")
    data.setdefault("kind", cls.KIND)
    try:
        res = parse_resource(data, source=path)
    except APIError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(res, cls):
        raise ValueError(f"{path!r}: decoded a {type(res).__name__}, expected {cls.KIND}")
    return key, res


def passthrough(path: str, value: Any) -> Output:
    """The v3 resource unchanged, under its canonical ResourceKey path."""
    return {resource_key(path).default_path(): value}


# --- v1 value formatting (the JSON shapes upstream's model types marshal to) -----------------


def net_str(text: str) -> str:
    """A CIDR or bare IP as a masked network (``10.0.0.1`` -> ``10.0.0.1/32``)."""
    return str(ipaddress.ip_network(text, strict=False))


def ip_str(text: str) -> str:
    """An address in canonical text (an ``a/len`` form gives its address part)."""
    return str(ipaddress.ip_interface(text).ip) if "/" in text else str(ipaddress.ip_address(text))


def mac_str(text: str) -> str:
    """A MAC the way Go's net.HardwareAddr prints it: lower-case, colon separated."""
    digits = "".join(c for c in text.lower() if c in "0123456789abcdef")
    if len(digits) % 2 or not digits:
        raise ValueError(f"{text!r} is not a MAC address")
    return ":".join(digits[i : i + 2] for i in range(0, len(digits), 2))


def protocol_v1(protocol: int | str) -> int | str:
    """numorstring.Protocol.ToV1: names lower-cased (``TCP`` -> ``tcp``), numbers kept."""
    return protocol.lower() if isinstance(protocol, str) else protocol


def split_by_version(items: list[str], fmt: Any) -> tuple[list[str], list[str]]:
    """Format each address/network and split into (IPv4, IPv6) lists, keeping order."""
    v4: list[str] = []
    v6: list[str] = []
    for item in items:
        text = fmt(item)
        (v6 if ":" in text else v4).append(text)
    return v4, v6


def endpoint_ports(ports: list[Any] | None, *, named_only: bool) -> list[dict[str, Any]]:
    """model.EndpointPort JSON ``{name, protocol, port}``; unnamed ports are dropped for WEPs."""
    out = []
    for port in ports or []:
        if named_only and not port.name:
            continue
        out.append(
            {"name": port.name or "", "protocol": protocol_v1(port.protocol), "port": port.port}
        )
    return out
