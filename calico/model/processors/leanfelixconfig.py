"""A stored FelixConfiguration ``default`` / ``node.<host>`` read without pydantic, for Felix's
start-up config load and its syncer (design/performance.md "Cold start: no pydantic on a
clean start"). Every real cluster has a ``default``; its model's schema is the largest (40-48
ms to build) and validating it imported pydantic at every start.

The contract is ``leanpolicy``'s: a plain document (the fields in ``_FIELDS``, which is what
calico-node, the operator and most manifests write, with exact JSON types) is checked with the
validators the model runs and rendered as ``confignames.render`` renders the model's values,
in the model's field order; anything else (other fields, nulls, floats, a ``nodeSelector``,
a selector-scoped name) answers None and the processor decides, with its own error.
``tests/unit/model/test_lean_felixconfig.py`` checks the two agree over generated documents.
"""

from __future__ import annotations

from typing import Any

from calico.api import validators as v
from calico.durations import parse_duration
from calico.model.keys import GlobalConfigKey, HostConfigKey
from calico.model.processors.common import Output
from calico.model.processors.leanmeta import Decline, name_of, top
from calico.model.processors.paramnames import MILLISECOND_FIELDS, go_float, param_name
from calico.model.resources import ResourceKey

_LOG_LEVELS = frozenset({"trace", "debug", "info", "warning", "error", "fatal"})
_PORT = ("int", 0, 65535)

#: JSON name -> how the model types it, in the model's field order (the processor's output
#: order). ``("literal", ...)``: exact choices; ``("one_of", ...)``: case-insensitive choices
#: or empty (``felixconfig.one_of``); ``"log"``: a log level or empty (``LogSeverity``).
_FIELDS: dict[str, Any] = {
    "bpfConnectTimeLoadBalancing": ("literal", "TCP", "Enabled", "Disabled"),
    "bpfEnabled": "bool",
    "bpfHostNetworkedNATWithoutCTLB": ("literal", "Enabled", "Disabled"),
    "bpfLogLevel": ("one_of", "off", "info", "debug"),
    "chainInsertMode": ("one_of", "insert", "append"),
    "defaultEndpointToHostAction": ("one_of", "drop", "accept", "return"),
    "floatingIPs": ("literal", "Enabled", "Disabled"),
    "healthEnabled": "bool",
    "healthHost": "str",
    "healthPort": _PORT,
    "interfacePrefix": "str",
    "ipipEnabled": "bool",
    "ipipMTU": _PORT,
    "iptablesBackend": ("one_of", "auto", "legacy", "nft"),
    "iptablesRefreshInterval": "duration",
    "ipv6Support": "bool",
    "logFilePath": "str",
    "logSeverityFile": "log",
    "logSeverityScreen": "log",
    "logSeveritySys": "log",
    "nftablesMode": ("literal", "Disabled", "Enabled", "Auto"),
    "nftablesRefreshInterval": "duration",
    "prometheusMetricsEnabled": "bool",
    "prometheusMetricsPort": _PORT,
    "reportingInterval": "duration",
    "routeRefreshInterval": "duration",
    "usageReportingEnabled": "bool",
    "usageReportingInterval": "duration",
    "vxlanEnabled": "bool",
    "vxlanMTU": _PORT,
    "vxlanPort": _PORT,
    "vxlanVNI": ("int", 0, 16777215),
    "wireguardEnabled": "bool",
    "wireguardMTU": _PORT,
}
ANNOTATION_PREFIX = "config.projectcalico.org/"
NODE_CONFIG_PREFIX = "node."


def lean_felix_configuration(key: ResourceKey, value: Any) -> Output | None:
    """The processor's output for a plain stored ``default`` or ``node.<host>``, or None."""
    if key.name == "default":
        host = ""
    elif key.name.startswith(NODE_CONFIG_PREFIX):
        host = key.name[len(NODE_CONFIG_PREFIX) :]
    else:
        return None  # selector-scoped: passed through as the model
    try:
        meta, spec = top(key, value, "FelixConfiguration", namespaced=False)
        if name_of(key, meta) != key.name:
            return None
        if key.name != "default":  # the model's name rule (``node.`` alone is refused)
            v.dns1123_subdomain(host, "node name")
        if not spec.keys() <= _FIELDS.keys():
            return None
        params = _params(spec)
    except (Decline, ValueError):
        return None
    for name, text in (meta.get("annotations") or {}).items():
        if name.startswith(ANNOTATION_PREFIX) and name != ANNOTATION_PREFIX:
            params[name[len(ANNOTATION_PREFIX) :]] = text
    if key.name != "default":
        return {HostConfigKey(host, n): t for n, t in params.items()}
    return {GlobalConfigKey(n): t for n, t in params.items()}


def _params(spec: dict[str, Any]) -> dict[str, str]:
    params: dict[str, str] = {}
    for field, rule in _FIELDS.items():
        if field in spec:
            text = _render(field, rule, spec[field])
            if text:
                params[param_name(field)] = text
    return params


def _render(field: str, rule: Any, value: Any) -> str:
    """The field's v1 text after the model's check ("" = not configured); Decline when the
    value is not of the exact JSON type the lean read takes, ValueError when invalid."""
    if rule == "bool":
        if type(value) is not bool:
            raise Decline
        return "true" if value else "false"
    if isinstance(rule, tuple) and rule[0] == "int":
        if type(value) is not int:
            raise Decline
        if not rule[1] <= value <= rule[2]:
            raise ValueError(f"{field}: out of range")
        return str(value)
    if type(value) is not str:
        raise Decline
    if rule == "str":
        return value
    if rule == "duration":
        seconds = parse_duration(v.duration(value))
        return go_float(seconds * 1000 if field in MILLISECOND_FIELDS else seconds)
    if rule == "log":
        if value and value.lower() not in _LOG_LEVELS:
            raise ValueError(f"{field}: not a log level")
        return value
    kind, *choices = rule
    if kind == "literal" and value not in choices:
        raise ValueError(f"{field}: not one of {choices}")
    if kind == "one_of" and value and value.lower() not in choices:
        raise ValueError(f"{field}: not one of {choices}")
    return value
