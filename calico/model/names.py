"""WorkloadEndpoint v3 names <-> (node, orchestrator, workload, endpoint).

A v3 WorkloadEndpoint is named ``<node>-<orch>-<workload>-<endpoint>`` with every ``-`` inside a
part doubled, so single dashes are separators. Parsing reads left to right and takes ``--`` as
a literal dash, which makes the encoding reversible exactly when no part is empty and no part
after the first starts with ``-`` (otherwise ``a---b`` would be ambiguous). Kubernetes names
never start with ``-``; ``wep_name`` refuses parts that would not round-trip.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported on use: the CNI plugin builds names without the v1 key classes
    from calico.model.keys import WorkloadEndpointKey

WEP_NAME_PARTS = 4
_new = object.__new__
_set = object.__setattr__


class WepNameError(ValueError):
    """A WorkloadEndpoint name (or part) that cannot be split or built unambiguously."""


def _escape_part(part: str, index: int) -> str:
    if not part:
        raise WepNameError(f"workload endpoint name part {index} must not be empty")
    if index and part.startswith("-"):
        raise WepNameError(f"workload endpoint name part {part!r} must not start with '-'")
    return part.replace("-", "--")


def wep_name(node: str, orchestrator: str, workload: str, endpoint: str) -> str:
    """Build the v3 WorkloadEndpoint name; ``workload`` is the pod name (no namespace)."""
    parts = (node, orchestrator, workload, endpoint)
    return "-".join(_escape_part(p, i) for i, p in enumerate(parts))


def split_dashed(name: str) -> list[str]:
    """Split on single dashes, turning each ``--`` into a literal dash (left to right).

    A name without ``--`` is a plain ``str.split`` (every endpoint's name is split at each
    Felix start); the rest take the reference scan, ``split_dashed_scan``."""
    if "--" not in name:
        return name.split("-")
    return split_dashed_scan(name)


def split_dashed_scan(name: str) -> list[str]:
    """The character-by-character reference of :func:`split_dashed`."""
    parts: list[str] = []
    current: list[str] = []
    i, n = 0, len(name)
    while i < n:
        ch = name[i]
        if ch != "-":
            current.append(ch)
            i += 1
        elif i + 1 < n and name[i + 1] == "-":
            current.append("-")
            i += 2
        else:
            parts.append("".join(current))
            current = []
            i += 1
    parts.append("".join(current))
    return parts


def parse_wep_name(name: str) -> tuple[str, str, str, str]:
    """Split a v3 WorkloadEndpoint name into (node, orchestrator, workload, endpoint)."""
    parts = split_dashed(name)
    if len(parts) != WEP_NAME_PARTS or not all(parts):
        raise WepNameError(
            f"workload endpoint name {name!r} does not split into "
            "<node>-<orchestrator>-<workload>-<endpoint>"
        )
    return parts[0], parts[1], parts[2], parts[3]


def wep_key_from_v3(namespace: str, name: str) -> WorkloadEndpointKey:
    """The v1 key of a v3 WorkloadEndpoint: the workload ID gains the namespace."""
    if not namespace or "/" in namespace:
        raise WepNameError(f"namespace {namespace!r} is empty or contains '/'")
    node, orch, workload, endpoint = parse_wep_name(name)
    from calico.model.keys import WorkloadEndpointKey

    # Node, orchestrator and endpoint repeat across endpoints: one shared copy of each.
    intern = sys.intern
    return WorkloadEndpointKey(
        intern(node), intern(orch), f"{namespace}/{workload}", intern(endpoint)
    )


def wep_key_fast(namespace: str, name: str) -> WorkloadEndpointKey:
    """:func:`wep_key_from_v3` for the common name (no ``--``, no ``/``, four non-empty
    parts), with the key's slots and cached hash set directly: the checks the key's
    constructor makes all hold for such a name. Anything else goes to
    :func:`wep_key_from_v3`, which raises its errors (``tests/unit/model/test_lean_v1.py``)."""
    if namespace and "/" not in namespace and "--" not in name and "/" not in name:
        parts = name.split("-")
        if len(parts) == WEP_NAME_PARTS:
            node, orch, workload, endpoint = parts
            if node and orch and workload and endpoint:
                from calico.model.keys import WorkloadEndpointKey

                intern = sys.intern
                node, orch, endpoint = intern(node), intern(orch), intern(endpoint)
                workload = f"{namespace}/{workload}"
                key = _new(WorkloadEndpointKey)
                _set(key, "hostname", node)
                _set(key, "orchestrator_id", orch)
                _set(key, "workload_id", workload)
                _set(key, "endpoint_id", endpoint)
                _set(key, "_hash", hash((node, orch, workload, endpoint)))
                return key
    return wep_key_from_v3(namespace, name)


def wep_v3_from_key(key: WorkloadEndpointKey) -> tuple[str, str]:
    """Reverse of ``wep_key_from_v3``: (namespace, v3 name) for a namespaced workload ID."""
    namespace, sep, workload = key.workload_id.partition("/")
    if not sep or not namespace or not workload:
        raise WepNameError(f"workload ID {key.workload_id!r} is not <namespace>/<workload>")
    return namespace, wep_name(key.hostname, key.orchestrator_id, workload, key.endpoint_id)
