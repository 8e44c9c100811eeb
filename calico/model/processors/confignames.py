"""How a FelixConfiguration field becomes one Felix config parameter: its v1 name and its
string value.

Names: upstream uses the Go struct field name, or its ``confignamev1`` tag where the Felix
parameter is spelled differently (``ipipEnabled`` -> ``IpInIpEnabled``, the ``...Secs``
durations). We derive the Go name from the JSON name (first letter up, ``bpf``/``vxlan``/
``xdp``/``nat`` prefixes as acronyms) and list the exceptions. Felix matches parameter names
case-insensitively, so a Go-name guess that differs only in case is still read correctly.

Values: strings as upstream's config processor renders them - durations as (fractional)
seconds (milliseconds for the one ``...Millis`` parameter), lists comma-joined, booleans
``true``/``false``, failsafe ports ``tcp:22,udp:68`` (``none`` for an empty list).
"""

from __future__ import annotations

import ipaddress
import typing
from typing import Any

from pydantic import BaseModel

from calico.api import validators
from calico.api.felixconfig import FelixConfigurationSpec
from calico.durations import parse_duration
from calico.model.processors.paramnames import (
    MILLISECOND_FIELDS,
    NAME_EXCEPTIONS,
    NOT_PARAMETERS,
    go_float,
    param_name,
)

__all__ = [
    "DURATION_FIELDS",
    "MILLISECOND_FIELDS",
    "NAME_EXCEPTIONS",
    "NOT_PARAMETERS",
    "SPEC_FIELDS",
    "go_float",
    "param_name",
    "render",
    "spec_params",
]

#: Go field names of BPFConntrackTimeouts, by JSON name.
_CT_TIMEOUT_NAMES = {
    "creationGracePeriod": "CreationGracePeriod",
    "tcpSynSent": "TCPSynSent",
    "tcpEstablished": "TCPEstablished",
    "tcpFinsSeen": "TCPFinsSeen",
    "tcpResetSeen": "TCPResetSeen",
    "udpTimeout": "UDPTimeout",
    "genericTimeout": "GenericTimeout",
    "icmpTimeout": "ICMPTimeout",
}


def _is_duration(annotation: Any) -> bool:
    """Whether a field's type is the API's Duration (a str validated as a Go duration)."""
    for arg in (annotation, *typing.get_args(annotation)):
        for meta in getattr(arg, "__metadata__", ()):
            if getattr(meta, "func", None) is validators.duration:
                return True
    return False


#: (python attribute, JSON name) of every spec field, and the JSON names that are durations.
SPEC_FIELDS: tuple[tuple[str, str], ...] = tuple(
    (attr, info.alias or attr) for attr, info in FelixConfigurationSpec.model_fields.items()
)
DURATION_FIELDS = frozenset(
    info.alias or attr
    for attr, info in FelixConfigurationSpec.model_fields.items()
    if _is_duration(info.annotation)
)


def _proto_ports(items: list[Any]) -> str:
    if not items:
        return "none"
    parts = []
    for pp in items:
        proto = pp.protocol.lower()
        if not pp.net:
            parts.append(f"{proto}:{pp.port}")
        elif ipaddress.ip_network(pp.net, strict=False).version == 6:
            parts.append(f"{proto}:[{pp.net}]:{pp.port}")
        else:
            parts.append(f"{proto}:{pp.net}:{pp.port}")
    return ",".join(parts)


def _special(json_name: str, value: Any) -> str | None:
    """Fields whose value needs a dedicated rendering (None: use the generic one)."""
    if json_name in ("failsafeInboundHostPorts", "failsafeOutboundHostPorts"):
        return _proto_ports(value)
    if json_name == "routeTableRange":
        return f"{value.min}-{value.max}"
    if json_name == "routeTableRanges":
        return ",".join(f"{r.min}-{r.max}" for r in value)
    if json_name == "healthTimeoutOverrides":
        return ",".join(f"{o.name}={o.timeout}" for o in value)
    if json_name == "bpfConntrackTimeouts":
        wire = value.to_wire()
        return ",".join(f"{_CT_TIMEOUT_NAMES[k]}={v}" for k, v in wire.items())
    if json_name == "bpfLogFilters":
        return "".join(f"{k}={v}," for k, v in sorted(value.items()))
    return None


def render(json_name: str, value: Any) -> str | None:
    """The v1 string for one set field; None when it renders empty (= not configured)."""
    special = _special(json_name, value)
    if special is not None:
        return special
    if isinstance(value, bool):
        return "true" if value else "false"
    if json_name in DURATION_FIELDS and isinstance(value, str):
        seconds = parse_duration(value)
        return go_float(seconds * 1000 if json_name in MILLISECOND_FIELDS else seconds)
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, BaseModel):
        raise ValueError(f"{json_name}: no v1 rendering for {type(value).__name__}")
    text = str(value)
    return text or None


def spec_params(spec: FelixConfigurationSpec) -> dict[str, str]:
    """The v1 config parameters (name -> text) for every set field of a FelixConfiguration spec."""
    params: dict[str, str] = {}
    for attr, json_name in SPEC_FIELDS:
        field = getattr(spec, attr)
        if field is None or json_name in NOT_PARAMETERS:
            continue
        text = render(json_name, field)
        if text is not None:
            params[param_name(json_name)] = text
    return params
