"""Helpers every update processor shares: decoding a stored v3 KV, and v1 value formatting.

Processors are called with the resource's ``ResourceKey`` (parsed from the datastore path at
the syncer's boundary) and the decoded JSON as stored. They re-validate through the v3 models
(so defaults such as a policy's ``types`` and ``tier`` are applied even to values written by
hand) and report any failure as ``ValueError``: the syncer logs it and emits nothing for that
source key. They return typed keys and values (``calico.model.values``); a ResourceKey's value
is the decoded v3 resource.
"""

from __future__ import annotations

import ipaddress
import sys
from typing import Any

from calico.model.base import Key
from calico.model.resources import ResourceKey
from calico.model.v3_resources import decode, decode_resource
from calico.model.values import EndpointPort

__all__ = ["Output", "decode", "decode_resource", "passthrough"]

Output = dict[Key, Any]

NAMESPACE_LABEL = "projectcalico.org/namespace"
ORCHESTRATOR_LABEL = "projectcalico.org/orchestrator"
SERVICE_ACCOUNT_LABEL = "projectcalico.org/serviceaccount"
NAMESPACE_LABEL_PREFIX = "pcns."
SERVICE_ACCOUNT_LABEL_PREFIX = "pcsa."
NAMESPACE_PROFILE_PREFIX = "kns."


def passthrough(key: ResourceKey, value: Any) -> Output:
    """The v3 resource itself, validated, under its ResourceKey."""
    return {key: decode_resource(key, value)}


# --- v1 value formatting (the JSON shapes upstream's model types marshal to) -----------------


def net_str(text: str) -> str:
    """A CIDR or bare IP as a masked network (``10.0.0.1`` -> ``10.0.0.1/32``).

    An IPv4 ``/32`` that ``inet_pton`` accepts is already canonical (decimal octets, no
    leading zeros), so it is returned as is: one per endpoint at every Felix start."""
    from calico.api.validators import is_ipv4_host_cidr  # not at import: processors stay light

    if is_ipv4_host_cidr(text):
        return text
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


def share(text: str) -> str:
    """One shared copy of a string many endpoints repeat (label keys and values, profile
    names, node names): a decoded value is a fresh string per endpoint, and Felix keeps
    every endpoint for as long as it runs (design/performance.md "Full-Felix memory")."""
    return sys.intern(text) if type(text) is str else text


def protocol_v1(protocol: int | str) -> int | str:
    """numorstring.Protocol.ToV1: names lower-cased (``TCP`` -> ``tcp``), numbers kept."""
    return protocol.lower() if isinstance(protocol, str) else protocol


def _share_any(value: int | str) -> int | str:
    return share(value) if isinstance(value, str) else value


def split_by_version(items: list[str], fmt: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Format each address/network and split into (IPv4, IPv6), keeping order."""
    v4: list[str] = []
    v6: list[str] = []
    for item in items:
        text = fmt(item)
        (v6 if ":" in text else v4).append(text)
    return tuple(v4), tuple(v6)


def endpoint_ports(ports: list[Any] | None, *, named_only: bool) -> tuple[EndpointPort, ...]:
    """model.EndpointPort ``{name, protocol, port}``; unnamed ports are dropped for WEPs."""
    return tuple(
        EndpointPort(share(port.name or ""), _share_any(protocol_v1(port.protocol)), port.port)
        for port in ports or []
        if port.name or not named_only
    )


def wep_labels_v1(
    raw: dict[str, str], namespace: str, orchestrator: str | None, service_account: str | None
) -> dict[str, str]:
    """A WorkloadEndpoint's v1 labels: the stored ones but ``pcns.``/``pcsa.``, plus the
    namespace, orchestrator and service-account labels (upstream's client stamps these on
    the stored endpoint; ours does not), every string shared."""
    labels = {
        share(k): share(v)
        for k, v in raw.items()
        if not k.startswith((NAMESPACE_LABEL_PREFIX, SERVICE_ACCOUNT_LABEL_PREFIX))
    }
    labels[NAMESPACE_LABEL] = share(namespace)
    if orchestrator:
        labels[ORCHESTRATOR_LABEL] = share(orchestrator)
    if service_account:
        labels[SERVICE_ACCOUNT_LABEL] = share(service_account)
    return labels
