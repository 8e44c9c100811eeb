"""Upstream's v1 IPAM keys (``/calico/ipam/v2/...``) as the IPAM custom resources that store
them in Kubernetes: what ``datastore migrate import`` writes from an etcd export (upstream's
migrateipam pushes the same model objects through the KDD backend)."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from calico.datastore.errors import InvalidValueError
from calico.datastore.kubernetes.names import cidr_to_name

PREFIX = "/calico/ipam/v2/"


def _cidr(segment: str) -> str:
    """Path CIDR segment (``10.0.0.0-26``) -> ``10.0.0.0/26``."""
    addr, _, bits = segment.rpartition("-")
    return str(ipaddress.ip_network(f"{addr}/{bits}", strict=False))


def to_v3(key: str, value: str) -> tuple[str, str, dict[str, Any]]:
    """(v3 kind, CR name, v3-shaped spec) for a v1 IPAM key and its JSON value."""
    try:
        data = json.loads(value)
        parts = key[len(PREFIX) :].split("/")
        if parts[:1] == ["assignment"] and len(parts) == 4 and parts[2] == "block":
            cidr = _cidr(parts[3])
            return "IPAMBlock", cidr_to_name(cidr), {**data, "cidr": cidr}
        if parts[:1] == ["handle"] and len(parts) == 2:
            spec = {
                "handleID": parts[1],
                "block": data.get("block") or {},
                "deleted": bool(data.get("deleted")),
            }
            return "IPAMHandle", parts[1].lower(), spec
        if parts[:1] == ["host"] and len(parts) == 5 and parts[3] == "block":
            host, cidr = parts[1], _cidr(parts[4])
            spec = {
                "state": data.get("state") or "confirmed",
                "node": host,
                "cidr": cidr,
                "deleted": bool(data.get("deleted")),
                "type": "host",
            }
            return "BlockAffinity", f"{host}-{cidr_to_name(cidr)}", spec
        if parts == ["config"]:
            spec = {
                "strictAffinity": bool(data.get("strict_affinity")),
                "autoAllocateBlocks": bool(data.get("auto_allocate_blocks", True)),
                "maxBlocksPerHost": int(data.get("maxBlocksPerHost") or 0),
            }
            return "IPAMConfiguration", "default", spec
    except (ValueError, AttributeError, TypeError):
        pass
    raise InvalidValueError(f"key {key} is not supported by the Kubernetes datastore")
