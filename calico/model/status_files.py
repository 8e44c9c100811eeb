"""Endpoint status-file names, shared by Felix (which writes them) and the CNI plugin (which waits
for them), as upstream keeps such names in ``libcalico-go/lib/names``.

A workload endpoint's file is named ``<orchestrator> <workload> <endpoint>``: the three
WorkloadEndpointID fields, each escaped like Go's ``url.PathEscape`` (only
``A-Za-z0-9-_.~$&+:=@`` kept, the rest ``%XX`` upper-case hex), joined by single spaces (a space
is always escaped inside a field, so it is unambiguous), e.g. ``k8s default%2Fnginx eth0``.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

_SEPARATOR = " "
_GO_PATH_SEGMENT_SAFE = "$&+:=@"  # plus quote()'s always-safe A-Za-z0-9_.-~


def endpoint_status_filename(orchestrator: str, workload: str, endpoint: str) -> str:
    return _SEPARATOR.join(
        quote(p, safe=_GO_PATH_SEGMENT_SAFE) for p in (orchestrator, workload, endpoint)
    )


def parse_endpoint_status_filename(name: str) -> tuple[str, str, str] | None:
    """(orchestrator, workload, endpoint), or None for a name that is not a status file's."""
    parts = name.split(_SEPARATOR)
    if len(parts) != 3:
        return None
    orchestrator, workload, endpoint = (unquote(p) for p in parts)
    return orchestrator, workload, endpoint
