"""Upstream's Kubernetes-datastore names: CIDR names, affinity names, hostname hashes."""

from __future__ import annotations

import base64
import hashlib


def cidr_to_name(cidr: str) -> str:
    """``10.0.1.0/26`` -> ``10-0-1-0-26`` (never change: stored CR names depend on it)."""
    return cidr.replace(".", "-", 3).replace(":", "-", 7).replace("/", "-")


def hostname_hash(host: str) -> str:
    """The ``projectcalico.org/hostname-hash`` label: base32 (unpadded) of SHA3-256."""
    digest = hashlib.sha3_256(host.encode()).digest()
    return base64.b32encode(digest).decode().rstrip("=")
