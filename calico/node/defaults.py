"""Cluster-wide defaults a fresh datastore needs, each written only when missing.

ClusterInformation records the running version and every cluster type seen (types are merged,
never replaced, so mixed clusters keep all their labels). Felix, BGP and IPAM configuration get
upstream's starting values; existing objects only have empty fields filled, never overwritten.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from calico.api import Resource, parse_resource, resource_to_wire
from calico.datastore.client import Client
from calico.datastore.errors import (
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
    UpdateConflictError,
)

log = logging.getLogger(__name__)

API_VERSION = "projectcalico.org/v3"


def _doc(kind: str, name: str, spec: dict[str, Any]) -> Resource:
    return parse_resource(
        {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}
    )


def merge_cluster_types(existing: str, local: str) -> str:
    """Add each of ``local``'s comma-separated types missing from ``existing``, keeping order."""
    types = [t for t in existing.split(",") if t] if existing else []
    for t in local.split(","):
        if t and t not in types:
            types.append(t)
    return ",".join(types)


def ensure_cluster_information(client: Client, version: str, cluster_type: str) -> Resource:
    """EnsureInitialized, plus bringing calicoVersion and clusterType up to date."""
    for _ in range(5):
        current = client.ensure_initialized(version, cluster_type)
        wire = resource_to_wire(current)
        spec = wire.setdefault("spec", {})
        merged = merge_cluster_types(spec.get("clusterType", ""), cluster_type)
        if spec.get("calicoVersion") == version and spec.get("clusterType", "") == merged:
            return current
        spec["calicoVersion"] = version
        if merged:
            spec["clusterType"] = merged
        try:
            return client.update(parse_resource(wire))
        except (UpdateConflictError, ResourceDoesNotExistError):
            continue
    raise UpdateConflictError("ClusterInformation(default)", "kept racing with other writers")


def _fill(client: Client, kind: str, name: str, wanted: dict[str, Any]) -> None:
    """Create ``kind/name`` with ``wanted``, or set those of its fields that are still empty."""
    try:
        current = client.get(kind, name)
    except ResourceDoesNotExistError:
        with contextlib.suppress(ResourceAlreadyExistsError):
            client.create(_doc(kind, name, wanted))
            log.info("Created default %s(%s)", kind, name)
        return
    wire = resource_to_wire(current)
    spec = wire.setdefault("spec", {})
    missing = {k: val for k, val in wanted.items() if spec.get(k) in (None, "")}
    if not missing:
        return
    spec.update(missing)
    try:
        client.update(parse_resource(wire))
        log.info("Filled default %s in %s(%s)", ", ".join(sorted(missing)), kind, name)
    except UpdateConflictError:
        log.info("Ignoring conflict when setting defaults on %s(%s)", kind, name)


def ensure_default_config(client: Client, node_name: str, datastore_type: str) -> None:
    _fill(
        client,
        "FelixConfiguration",
        "default",
        {"reportingInterval": "0s", "logSeverityScreen": "Info"},
    )
    # Lets workloads reach services on their own host unless the operator says otherwise.
    # The Kubernetes datastore has no per-node Felix configuration upstream.
    if datastore_type != "kubernetes":
        _fill(
            client,
            "FelixConfiguration",
            f"node.{node_name}",
            {"defaultEndpointToHostAction": "Return"},
        )
    try:
        client.get("BGPConfiguration", "default")
    except ResourceDoesNotExistError:
        with contextlib.suppress(ResourceAlreadyExistsError):
            client.create(_doc("BGPConfiguration", "default", {}))
            log.info("Created default BGPConfiguration(default)")
    try:
        client.get("IPAMConfiguration", "default")
    except ResourceDoesNotExistError:
        with contextlib.suppress(ResourceAlreadyExistsError):
            client.create(
                _doc(
                    "IPAMConfiguration",
                    "default",
                    {"autoAllocateBlocks": True, "strictAffinity": False, "maxBlocksPerHost": 0},
                )
            )
            log.info("Created default IPAMConfiguration(default)")
