"""Annotated field types shared by the BGP, cluster, IPAM and FelixConfiguration models.

They live apart from :mod:`calico.api.bgp` (which re-exports them) so that a process
validating Nodes, IP pools or FelixConfiguration (Felix at start-up) does not also create the
20 BGP model classes (~18 ms; design/performance.md "Cold start: the HTTP stack and the BGP
models").
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, WithJsonSchema

from calico.api import validators as v

INT_OR_STRING = v.INT_OR_STRING  # re-exported: felixconfig and older callers import it here


def _as_number(value: object) -> int:
    """``v.asn`` plus a guard: YAML reads an unquoted ``1.10`` as the float 1.1, losing a digit."""
    if isinstance(value, float):
        raise ValueError(
            f"AS number {value!r} was given as a decimal number; "
            'quote dotted AS numbers, e.g. asNumber: "1.10"'
        )
    return v.asn(value)  # type: ignore[arg-type]


ASNumber = Annotated[int, BeforeValidator(_as_number), WithJsonSchema(INT_OR_STRING)]
Duration = Annotated[str, AfterValidator(v.duration)]
Selector = Annotated[str, AfterValidator(v.selector_expression)]
LogSeverity = Annotated[str, AfterValidator(lambda s: _log_severity(s))]
#: Which classes of IP pool a component programs cluster routes for (upstream's enum, shared
#: by BGPConfiguration and FelixConfiguration ``programClusterRoutes``).
ClusterRoutes = Literal["Disabled", "EnabledIPIPOnly", "EnabledNoEncapOnly", "Enabled"]

_LOG_LEVELS = ("Trace", "Debug", "Info", "Warning", "Error", "Fatal")


def _log_severity(value: str) -> str:
    """Upstream matches log levels case-insensitively; the text is kept as written."""
    if value and value.lower() not in {x.lower() for x in _LOG_LEVELS}:
        raise ValueError(f"{value!r} is not a log level; expected one of {', '.join(_LOG_LEVELS)}")
    return value
