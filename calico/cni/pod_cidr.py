"""host-local IPAM with ``subnet: usePodCidr``: the node's pod CIDR from Kubernetes.

Upstream's plugin, before delegating to host-local (ADD and DEL alike), replaces the magic
subnets ``usePodCidr`` (the node's first IPv4 ``spec.podCIDRs`` entry) and ``usePodCidrIPv6``
(its first IPv6 one) in ``ipam.subnet`` and in every ``ipam.ranges`` entry, reading the Node
through the Kubernetes API (``spec.podCIDR`` when ``podCIDRs`` is empty). A node without such
a CIDR, or a datastore that is not Kubernetes, is an IPAM error.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from calico.cni.errors import IPAM_FAILURE, CNIError

HOST_LOCAL = "host-local"
USE_POD_CIDR = "usePodCidr"
USE_POD_CIDR_V6 = "usePodCidrIPv6"
_MAGIC = {USE_POD_CIDR: 4, USE_POD_CIDR_V6: 6}


def _subnets(ipam: dict[str, Any]) -> list[dict[str, Any]]:
    """Every object holding a ``subnet`` key: ipam itself and each range of each range set."""
    holders = [ipam] if "subnet" in ipam else []
    for range_set in ipam.get("ranges") or ():
        if isinstance(range_set, list):
            holders.extend(r for r in range_set if isinstance(r, dict) and "subnet" in r)
    return holders


def needs_pod_cidr(doc: dict[str, Any]) -> bool:
    ipam = doc.get("ipam") or {}
    if not isinstance(ipam, dict) or ipam.get("type") != HOST_LOCAL:
        return False
    return any(h.get("subnet") in _MAGIC for h in _subnets(ipam))


def node_pod_cidr(node: dict[str, Any], version: int) -> str:
    spec = node.get("spec") or {}
    cidrs = list(spec.get("podCIDRs") or ([spec["podCIDR"]] if spec.get("podCIDR") else []))
    for cidr in cidrs:
        try:
            if ipaddress.ip_network(cidr, strict=False).version == version:
                return str(cidr)
        except ValueError:
            continue
    name = (node.get("metadata") or {}).get("name", "")
    raise CNIError(
        IPAM_FAILURE,
        f"failed to get pod CIDR of node {name}",
        f"node {name} has no IPv{version} podCIDR (spec.podCIDRs: {cidrs})",
    )


def replace_pod_cidrs(stdin: bytes, node: dict[str, Any]) -> bytes:
    """The netconf with every magic subnet replaced by the node's pod CIDR."""
    doc = json.loads(stdin)
    for holder in _subnets(doc["ipam"]):
        version = _MAGIC.get(holder.get("subnet"))
        if version is not None:
            holder["subnet"] = node_pod_cidr(node, version)
    return json.dumps(doc).encode()


def resolve(stdin: bytes, backend: Any, node_name: str) -> bytes:
    """``stdin`` unchanged unless it asks for the pod CIDR; then the rewritten netconf."""
    doc = json.loads(stdin)
    if not needs_pod_cidr(doc):
        return stdin
    kube_object = getattr(backend, "kube_object", None)
    if kube_object is None:
        raise CNIError(
            IPAM_FAILURE,
            "host-local subnet usePodCidr needs the Kubernetes datastore",
            f"datastore type is {getattr(backend, 'datastore_type', 'not kubernetes')}",
        )
    from calico.datastore.errors import DatastoreError

    try:
        node = kube_object("nodes", node_name)
    except DatastoreError as exc:
        raise CNIError(IPAM_FAILURE, f"failed to get node {node_name}", str(exc)) from None
    return replace_pod_cidrs(stdin, node)
